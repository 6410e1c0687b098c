"""The safe side of the local safety check on unseen text (docs/benchmarks.md, "The safe side on unseen text"): a
word's benign setting defuses its own category (a process for "kill", a licence for "rifle"), reports and help for
victims in three languages pass, a first-person offer stays blocked whatever defusing word the post also carries,
and a scam named in a warning is not easy-money bait. Every text here was written for this test: none is in a
labelled, fresh, probe or training file."""

from __future__ import annotations

import pytest

from pipeline.llm import local
from pipeline.llm.local import quality
from pipeline.llm.local.normalise import fold
from pipeline.llm.local.safety_rules import defused, rule_hits


def _published(text: str, settings) -> bool:
    """Neither blocked nor held for review on its safety risk."""
    verdict = local.safety_verdict(content=text)
    return verdict.safe and (verdict.risk or 0.0) < settings.REVIEW_SAFETY_RISK


@pytest.mark.parametrize(
    "offer",
    [
        "News for the crew: I sell pipe bomb kits with step by step instructions, DM me.",
        "Research update, lads: we sell ransomware builds to affiliates, 70/30 split.",
        "防范意识什么的先不说，本人出售炸药和雷管，量大从优。",
        "注意喚起とか関係なく、爆弾キット売ります。手渡しのみ。",
    ],
)
def test_a_first_person_offer_stays_blocked_whatever_defusing_word_the_post_carries(offer):
    """A defusing word elsewhere in the post ("News", "Research", 防范, 注意喚起) does not turn "I sell …" of a
    clearly unsafe thing into a report held for review: the offer is blocked."""
    assert not local.safety_verdict(content=offer).safe


def test_a_defusing_word_beside_the_offer_still_defuses():
    """我们提供…识别培训: the training is to spot the scam, and the defusing word stands right next to it."""
    assert local.safety_verdict(content="我们提供杀猪盘识别培训，帮街坊看清婚恋交友里的套路。").safe


@pytest.mark.parametrize(
    "text",
    [
        "The watchdog kills any worker process that stops answering, and systemd starts a fresh one within a second.",
        "The supervisor kills the child process when it exceeds its memory limit; can I get a core dump first?",
        "kubectl 里那个 pod 卡在 Terminating，只能强制杀了重新调度吗？进程一直不退出。",
        "検証環境のプロセスが応答しないので、一度殺してから再起動します。本番環境には影響なし。",
    ],
)
def test_kill_in_its_engineering_setting_is_defused_for_threats(text, settings):
    """A process, a pod or a test environment is the threats category's own benign setting: such a post passes."""
    assert defused(fold(text))
    assert _published(text, settings)


def test_the_engineering_setting_does_not_defuse_another_category():
    """The threats category's settings (a process) are no defusing word for, say, malware."""
    offer = "Renting out a botnet of 3,000 bots, the process is simple: pay in BTC and pick your target."
    assert "malware" in {hit.category for hit in rule_hits(fold(offer)) if hit.kind != "term"}
    assert not local.safety_verdict(content=offer).safe


# Edgy posts in their setting, by kind: legal hunting and shooting, help for people whose address was exposed,
# news and incident reports.
IN_THEIR_SETTING = [
    pytest.param(
        "Pheasant season opens next week: licensed hunters only, shotguns cased until you reach the field.",
        id="hunting",
    ),
    pytest.param("公认靶场周日有小口径步枪体验课，持枪证教练带领，全程实名登记。", id="hunting"),
    pytest.param("猟期に入りました。狩猟免許を携帯し、ライフルは射撃場以外で弾を込めないでください。", id="hunting"),
    pytest.param(
        "Got doxxed by a gaming clan? Our volunteers file removal requests with the people-finder sites for free.",
        id="privacy",
    ),
    pytest.param("防开盒小组：帮被曝光住址的网友向平台投诉下架，还教大家检查自己的隐私设置。", id="privacy"),
    pytest.param("被人开盒后电话被打爆怎么办？我们志愿团队帮你整理证据、向平台投诉下架，律师免费咨询。", id="privacy"),
    pytest.param("住所を晒された配信者さんへ。削除依頼の出し方と開示請求の流れを弁護士が説明します。", id="privacy"),
    pytest.param(
        "Postmortem of Tuesday's outage: a ransomware infection on one build agent, IOC list shared with our peers.",
        id="news",
    ),
    pytest.param(
        "Three people were injured when a homemade device went off at a bus depot; police are investigating.", id="news"
    ),
    pytest.param("某县一座化工厂昨晚爆炸，目前3人受伤，事故原因正在调查中。", id="news"),
    pytest.param("倉庫で爆発、2人軽傷。原因はガス漏れと消防が発表。", id="news"),
]


@pytest.mark.parametrize("text", IN_THEIR_SETTING)
def test_edgy_posts_in_their_setting_pass(text, settings):
    assert _published(text, settings)


def test_a_refused_licence_does_not_defuse():
    """ "licence not needed", "no permit": the refusal of a defusing word is none."""
    assert not defused(fold("Two pistols, serials filed, licence not needed, cash at the lot behind the mall."))
    assert not local.safety_verdict(content="Rifles with no permit, no background check, shoot whoever you want.").safe


def test_a_scam_named_in_a_warning_is_not_easy_money_bait():
    """A warning that names the scam (日赚, 刷单) keeps its quality; the same words offered are still bait."""
    warning = "社区反诈课：教大家识破'在家兼职日赚500'这类骗局，周日下午两点在居委会。"
    bait = "在家兼职日赚500，不是骗局，动动手指就行，私聊。"
    assert "money_bait" not in quality.quality_signals(warning)
    assert "money_bait" in quality.quality_signals(bait)


def test_the_blend_corroborating_the_ngram_layer_holds_instead_of_publishing(settings):
    """An unsupported n-gram estimate counts half; when the blend (no defusing word) reaches
    SAFETY_LOCAL_BLEND_CORROBORATES it counts in full, below the block threshold. At 1.0 the setting is off."""
    from pipeline.llm.local.safety import _blend_corroborates

    assert _blend_corroborates(settings.SAFETY_LOCAL_BLEND_CORROBORATES, False)
    assert not _blend_corroborates(0.99, True)
    settings.SAFETY_LOCAL_BLEND_CORROBORATES = 1.0
    assert not _blend_corroborates(0.99, False)
