"""The local analyzer's content judgments: spam and quality signals, broadcast type, keywords, profile keywords,
suggestions and the official note, in English, Chinese and Japanese. Figures on the labelled sets:
`.venv/bin/python bench/analyzer_quality_content.py`."""

from __future__ import annotations

import pytest

from pipeline.llm import local
from pipeline.llm.local.quality import SIGNALS, quality_signals

THRESHOLD = 0.2  # settings.QUALITY_THRESHOLD's default


def gated(text: str) -> bool:
    """What the pipeline would do: discard on the verdict, or on quality below the threshold."""
    result = local.extract(content=text)
    return result.discard or result.quality < THRESHOLD


@pytest.mark.parametrize(
    "text",
    [
        "Token listing tonight, 200x guaranteed gains, buy before the whales do!!!",
        "Make 300 dollars a day from home, no experience required, message me",
        "testing, please ignore",
        "Looking for a good video person for some projects, details later.",
        "稳赚不赔的项目，跟我一起爆赚，私信领取名额",
        "在家兼职，日赚八百，加我微信",
        "测试",
        "寻找一个好项目的合作伙伴，细节后面再说",
        "このトークンは爆上げ確定、億り人になれる！詳細はDMで",
        "副業で誰でも稼げる方法、詳細はDMで",
        "テスト",
        "ちょっとした仕事を頼める人を探しています、詳しくはDMで",
        "https://bit.ly/x1 https://bit.ly/x2",
    ],
)
def test_spam_signals_are_discarded_in_every_language(text):
    assert gated(text)


@pytest.mark.parametrize(
    "text",
    [
        "Selling my old ThinkPad T14, 16 GB RAM, 380 EUR, DM me if interested.",
        "We test firmware for industrial PLCs against IEC 62443; 3-week engagements from 6000 USD.",
        "出租一台RTX 4090主机，每天120元，有意私信。",
        "测试工程师招聘：负责支付系统的自动化测试，杭州，月薪两万。",
        "ソフトウェアテストの自動化を請け負います。Playwright対応、1画面5千円から。",
        "Need a Go developer to add OAuth2 to our billing API by 20 March, budget 4000 USD.",
    ],
)
def test_concrete_posts_that_mention_dm_or_test_pass(text):
    assert not gated(text)


@pytest.mark.parametrize(
    ("text", "signal"),
    [
        ("$PEPEX is the next 1000x, stealth launch just happened, get in now", "pump"),
        ("Low cap gem about to list, easy 500x from here", "pump"),
        ("Our fund pays 4% daily returns, withdraw anytime", "pump"),
        ("Copy my trades: guaranteed profits every single week", "pump"),
        ("喊单群今晚开车，百倍币等你上车", "pump"),
        ("この草コインは必ず儲かる、今のうちに", "pump"),
        ("Side hustle that pays every day, just need a phone", "money_bait"),
        ("宝妈在家用手机赚钱，动动手指就有收入", "money_bait"),
        ("スマホだけで不労所得、主婦でも簡単に稼げます", "money_bait"),
        ("Want the list? Telegram me.", "dm_bait"),
        ("詳しい話は公式LINEで。プロフのリンクから", "dm_bait"),
        ("Follow for follow, tag a friend below", "engagement_bait"),
        ("互粉互赞，求关注", "engagement_bait"),
        ("zzzz", "test_post"),
        ("いいいいい", "test_post"),
        ("121212", "test_post"),
        ("asdf", "test_post"),
    ],
)
def test_bait_said_in_other_words_is_named(text, signal):
    assert signal in quality_signals(text)


@pytest.mark.parametrize(
    "text",
    [
        "The new planner made our nightly job 10x faster; another 10x would need a columnar store.",
        "Signups grew 5% weekly through Q3 after the onboarding rewrite.",
        "Savings account now pays 4.1% interest a year, fixed for 12 months.",
        "OK",
        "GPU?",
        "Ping me if the staging deploy breaks again tonight.",
    ],
)
def test_ordinary_posts_with_multipliers_percentages_or_few_letters_are_not_bait(text):
    signals = quality_signals(text)
    assert not {"pump", "test_post"} & set(signals), signals


@pytest.mark.parametrize(
    ("concrete", "vague"),
    [
        (
            "Renting 8 H100 GPUs in Helsinki at 2.10 USD per GPU-hour, from 3 March, InfiniBand included.",
            "Have some GPUs available for the right person, more details soon.",
        ),
        (
            "招聘一名Flutter开发，负责电商App，成都，月薪一万五到两万，三个月试用。",
            "招人做个App，待遇好，具体私聊。",
        ),
        (
            "京都の町家を改装したオフィスを月額12万円で貸し出します。光回線と会議室付き、4月から入居可。",
            "いい物件があります。興味ある方は連絡ください。",
        ),
    ],
)
def test_concrete_posts_score_above_vague_ones(concrete, vague):
    high, low = local.extract(content=concrete), local.extract(content=vague)
    assert not high.discard and high.quality >= 0.7
    assert high.quality > (0.0 if low.discard else low.quality) + 0.3


def test_every_signal_found_has_a_documented_weight():
    found = quality_signals("TOKEN 100x GUARANTEED gains!!! 🚀🚀🚀 DM me, details later https://x.example", "", 1)
    assert found and set(found) <= set(SIGNALS)
    assert all(SIGNALS[name].meaning for name in SIGNALS)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Need someone to review my Rust code", "demand"),
        ("Want somebody to proofread a grant proposal in French.", "demand"),
        ("Data engineer available for hire, Spark and Kafka, from May.", "supply"),
        ("Offering weekend shifts of on-call SRE cover for small teams.", "supply"),
        ("CVE-2031-2002 in the zlib inflate path allows heap overflow.", "alert"),
        ("Outage: the EU login service rejects every token since 08:00.", "alert"),
        ("招聘三名数据标注员，远程，按件计费。", "demand"),
        ("求一台二手3D打印机，预算两千。", "demand"),
        ("出租办公室工位，朝阳区，每月一千五。", "supply"),
        ("承接安卓App外包，两周交付。", "supply"),
        ("警报：华北机房网络中断，部分服务不可用。", "alert"),
        ("翻訳者を募集しています。英語から日本語、技術文書。", "demand"),
        ("週末に使える撮影スタジオを探しています。", "demand"),
        ("社内システムの保守を請け負います。", "supply"),
        ("東京リージョンで障害が起きています。", "alert"),
    ],
)
def test_broadcast_type_in_each_language(text, kind):
    assert local.extract(content=text).broadcast_type == kind


@pytest.mark.parametrize(
    ("text", "wanted", "unwanted"),
    [
        (
            "Looking for a Kotlin and Jetpack Compose developer, remote, 8 weeks, budget 7000 USD.",
            {"kotlin"},
            {"usd", "budget", "remote", "weeks"},
        ),
        (
            "Critical bug CVE-2031-4411 in libpng affects image uploads; patch today.",
            {"cve-2031-4411", "libpng"},
            set(),
        ),
        ("招聘一名嵌入式工程师，薪资可谈，三个月交付。", {"嵌入式"}, {"可谈", "三个月", "招聘"}),
        ("弊社はPythonの講師を募集しています。", {"講師"}, {"弊社", "募集"}),
        # A Latin name inside Chinese or Japanese text is what a reader searches for; the asking, offering
        # and announcing words around it are not.
        ("有没有人知道怎么在Flask里做多租户的数据隔离？求助", {"flask", "租户"}, {"有没有", "怎么", "知道", "求助"}),
        ("注意：Firefoxの拡張機能がパスワードを盗むことが判明しました。", {"firefox", "拡張機能"}, {"注意", "判明"}),
        (
            "神戸で週末にハッカソンを開催します。テーマはRustと防災、無料です。",
            {"rust", "ハッカソン"},
            {"開催", "無料"},
        ),
    ],
)
def test_keywords_are_searchable_terms_not_boilerplate(text, wanted, unwanted):
    found = local.extract(content=text).keywords
    assert all(any(term in keyword for keyword in found) for term in wanted), found
    assert unwanted.isdisjoint(found), found


def test_profile_keywords_come_from_seeks_and_offers_first_without_boilerplate():
    profile = local.profile_keywords(
        name="Orbit",
        bio="A passionate team with ten years of experience, based in Munich.",
        offers="Kubernetes consulting",
        seeks="Rust code review",
    )
    assert profile.keywords[0].startswith("rust") and "kubernetes" in " ".join(profile.keywords[:4])
    assert {"ten years", "team", "passionate", "experience", "ten"}.isdisjoint(profile.keywords)
    assert profile.country_codes == ["DE"]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Need a reviewer for my Rust reviewer tool in Rust.", "demand"),
        ("Looking for a Rust reviewer with Rust experience.", "demand"),
        ("招聘运维，薪资可谈。", "demand"),
        ("ハッカソンの審査員を探しています。", "demand"),
    ],
)
def test_suggestions_read_as_sentences_or_are_empty(text, kind):
    reply = local.suggestion(content=text, summary="", broadcast_type=kind).suggestion
    if not reply:
        return
    topic = reply.split("help with ", 1)[-1].split(",", 1)[0] if reply.startswith("If") else reply
    if reply.startswith("If"):
        first, _, second = topic.partition(" and ")
        assert not (second and (first in second or second in first or set(first.split()) & set(second.split())))
    assert "可谈" not in reply


def test_suggestion_is_empty_when_no_keyword_names_a_topic():
    assert local.suggestion(content="ok", summary="", broadcast_type="info").suggestion == ""


def test_official_first_broadcast_note_never_names_the_agent_as_its_topic():
    content = "Quasar here: Quasar offers Quasar-grade load testing for gRPC services."
    message = local.official_reply(kind="first_broadcast", agent_name="Quasar", content=content).message
    topic = message.split(" about ", 1)[1].split(", Quasar!", 1)[0] if " about " in message else ""
    assert "quasar" not in topic.lower() and message.count("Quasar") == 1


def test_profile_keywords_leave_credentials_out_and_take_the_bio_only_to_top_up_a_short_list():
    tutor = local.profile_keywords(
        name="Tutor",
        bio="Mathematics PhD; ten years of teaching at a university in Lyon.",
        offers="Linear algebra tutoring for university students",
        seeks="Students who need help with matrices and vector spaces",
    )
    assert not any("phd" in keyword or "teaching" in keyword for keyword in tutor.keywords), tutor.keywords
    bio_only = local.profile_keywords(name="Ops", bio="Mathematics PhD, runs GPU clusters.", offers="", seeks="")
    assert "gpu clusters" in " ".join(bio_only.keywords) and not any("phd" in k for k in bio_only.keywords)


@pytest.mark.parametrize(
    ("text", "kind", "written", "lowered"),
    [
        ("我们在深圳有 16 张 A100 显卡可以按小时出租，价格可谈。", "supply", "A100", "a100"),
        ("Offering PostgreSQL tuning for teams on RDS, 120 USD per hour.", "supply", "PostgreSQL", "postgresql"),
    ],
)
def test_suggestions_spell_names_as_the_broadcast_does(text, kind, written, lowered):
    reply = local.suggestion(content=text, summary="", broadcast_type=kind).suggestion
    assert written in reply and lowered not in reply, reply
