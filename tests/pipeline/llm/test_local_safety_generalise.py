"""The local safety check on phrasings beyond its first lexicon (docs/model-layer.md, "Local safety"): the slang of
carding, fraud recruiting, intrusion for hire and trafficking in Chinese and Japanese, dehumanising words aimed at
a group, and each one's safe-but-edgy twin; the training-only cases the learned layers read. Every text here was
written for this test: none is in the labelled set or in the training files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench.safety_set import EXTRA_TRAINING, PROBE_SET, load_cases, training_lines
from pipeline.llm import local
from pipeline.llm.local.normalise import fold
from pipeline.llm.local.safety import UNSUPPORTED_LEARNED_RISK
from pipeline.llm.local.safety_classifier import classifier, features
from pipeline.llm.local.safety_rules import defused, rule_hits

# (blocked, its edgy twin that passes): the same subject, once offered and once reported, prevented or researched.
TWINS = [
    (
        "收一手四件套和料子，长期合作，价格从优。",
        "银行风控提醒：不要出借四件套，收料子的都是诈骗团伙，已有人被判刑。",
    ),
    (
        "招跑分兄弟，有卡就能做，流水提成日结。",
        "反诈宣传：所谓跑分就是帮人洗钱，警方已破获多个团伙。",
    ),
    (
        "出售肉鸡和免杀远控，按台计费，包月更新。",
        "安全研究：如何检测服务器是否沦为肉鸡，附排查脚本。",
    ),
    (
        "裏バイト、荷物を受け取って届けるだけ、即日払い、詳細はテレグラムで。",
        "闇バイトの注意喚起：受け子の募集に応じると逮捕されます、相談窓口はこちら。",
    ),
    (
        "他人名義の口座とクレカ情報をセットで販売、使えなければ交換。",
        "銀行の不正検知担当です、他人名義の口座売買を見抜く方法を勉強会で共有します。",
    ),
    (
        "Access broker: fresh shells on a regional bank, RDP access to 40 hosts, bids open.",
        "Threat report: an access broker sold RDP access to a regional bank; indicators and detection rules inside.",
    ),
    (
        "Hostess jobs abroad, flights paid, the club holds your passport until the debt is cleared.",
        "Legal aid for workers whose employer holds their passport until a debt is cleared, free consultation.",
    ),
    (
        "Those refugees are vermin, exterminate them before they breed.",
        "Research paper: how posts calling refugees rats spread before attacks, with a dataset for moderators.",
    ),
    (
        "あの難民どもは害虫だ、一人残らず駆除しろ。",
        "ヘイトスピーチの研究：難民を害虫に例える投稿の拡散を分析した論文です。",
    ),
]


# The second pass: English intrusion for hire, threats, weapons and drugs slang; Japanese fraud recruiting, threats and
# weapons. Each unsafe text passed before these terms and training cases; each twin names the same thing and passes.
SLANG_TWINS = [
    (
        "Swatting service: we call in a fake hostage situation at any address you send.",
        "News: police arrested a man who made fake hostage calls to streamers' homes.",
    ),
    (
        "Glock switches in stock, ships fast, discreet packaging.",
        "Police warn about Glock switches sold online; possession is a felony.",
    ),
    (
        "Percs and xans, delivery tonight, hit my snap.",
        "Harm reduction: fake percs and xans are often pressed with fentanyl, test strips are free at the clinic.",
    ),
    (
        "Wallet drainer kit for mint pages, sweeps every wallet that connects, 20% fee.",
        "Security research: how a wallet drainer kit sweeps every wallet that connects, and how to detect one.",
    ),
    (
        "打ち子募集、指示通りに台を打つだけで日給2万円。",
        "ニュース：打ち子を使った詐欺グループを警察が摘発、SNSの高額バイトに注意。",
    ),
    (
        "店長を待ち伏せして刺してやる、閉店後に裏口で。",
        "ストーカーに待ち伏せされたときの対処法、警察への相談窓口を紹介します。",
    ),
    (
        "架空請求のメールを大量に送る仕事、報酬は歩合制。",
        "架空請求のハガキが届いたら、消費生活センターに相談してください。",
    ),
    (
        "子供を誘拐して身代金を取る計画、仲間を募集中。",
        "ニュース：身代金を要求した男3人を逮捕、誘拐された男児は無事保護。",
    ),
    (
        "改造エアガンで実弾を撃てるようにしました、欲しい人に売ります。",
        "改造エアガンの所持で書類送検、警察が注意を呼びかけ。",
    ),
]


@pytest.mark.parametrize(("unsafe", "edgy"), SLANG_TWINS, ids=[f"slang{index}" for index in range(len(SLANG_TWINS))])
def test_second_pass_slang_is_blocked_and_its_twin_passes(unsafe, edgy):
    assert not local.safety_verdict(content=unsafe).safe
    assert local.safety_verdict(content=edgy).safe


# The third pass: intrusion for hire, refund fraud, weapons conversions and trafficking in English, Chinese and
# Japanese, each with a twin on the same subject. Before this pass each pair had one of its texts judged wrongly.
THIRD_PASS_TWINS = [
    (
        "Renting my bot net by the day, 25k nodes, good for floods and stuffing, crypto only",
        "CERT advisory: a 25k-node botnet is flooding ISPs; block these C2 addresses and patch your routers",
    ),
    (
        "Corporate VPN access for sale, admin rights, US retailer, 400 hosts, price in DM",
        "Threat intel: corporate VPN access to US retailers is being sold on forums; rotate credentials now",
    ),
    (
        "stresser spots open, knock any game server offline for an hour, cheap plans",
        "Webinar: how to spot stresser traffic early and keep your game servers online",
    ),
    (
        "Refund method for sale: social engineer the support chat and keep the order",
        "Retail fraud team: how we detect the refund method sold on forums and stop it at the support desk",
    ),
    (
        "how to turn a solvent trap into a can, drill guide and measurements",
        "Firearms law explainer: converting a solvent trap into a suppressor without a tax stamp is a felony",
    ),
    (
        "Selling my passport-holding service: workers from abroad, they repay the trip before getting wages",
        "Legal clinic for workers whose employer keeps their passport until the trip is repaid, free and confidential",
    ),
    ("出租肉鸡三万台，打流量按小时算，私聊", "安全通告：三万台摄像头被控制成为肉鸡，请修改默认密码"),
    ("野菜あります、手押しで即日、都内", "手押しの芝刈り機を譲ります、庭で使っていました"),
]


@pytest.mark.parametrize(
    ("unsafe", "edgy"), THIRD_PASS_TWINS, ids=[f"third{index}" for index in range(len(THIRD_PASS_TWINS))]
)
def test_third_pass_offers_are_blocked_and_their_twins_pass(unsafe, edgy):
    assert not local.safety_verdict(content=unsafe).safe
    assert local.safety_verdict(content=edgy).safe


@pytest.mark.parametrize(
    "text",
    [
        "Gun shop reminder: every sale needs a background check, and filed serial numbers are a felony",
        "Bomb squad talk at the library: why homemade explosives are so dangerous and what to do if you find one",
        "Payroll fraud alert: attackers who take over corporate email try to redirect salaries, verify by phone",
    ],
)
def test_warnings_naming_the_harm_pass(text):
    """A felony, the bomb squad, a fraud alert: the words of a warning defuse the category phrase beside them."""
    assert local.safety_verdict(content=text).safe


@pytest.mark.parametrize(
    "text",
    [
        "Fresh bread from our bakery, pickup downtown",
        "纯棉床上四件套，夏季新款，包邮",
        "Restocked: Pokémon cards, sealed booster boxes, bulk discount, ships in 2 days",
        "朝採れ野菜の宅配、まとめ買いで割引",
        # Private sales and paid odd jobs: "paying well", "cash or bank transfer" are everyday words too.
        "Paying well for a quick logo for my bakery, need it by Friday.",
        "Selling my 2015 Honda Civic, 120k miles, cash or bank transfer, Leeds.",
    ],
)
def test_marketplace_posts_that_share_the_words_of_offers_pass(text):
    """ "fresh", "restocked", "bulk", a bedding set (四件套) and vegetables (野菜) are everyday sale words too."""
    assert local.safety_verdict(content=text).safe


@pytest.mark.parametrize(
    "text",
    [
        "Hiring incident responders for ransomware cases, on-call rotation.",
        "We are hiring engineers to help hospitals recover from ransomware attacks.",
        "Join our team fighting botnets at a national CERT, remote OK.",
        "Shrooms foraging walk this Sunday: learn to tell edible mushrooms from poisonous ones.",
    ],
)
def test_security_hiring_and_everyday_words_near_new_slang_pass(text):
    assert local.safety_verdict(content=text).safe


@pytest.mark.parametrize(("unsafe", "edgy"), TWINS, ids=[f"twin{index}" for index in range(len(TWINS))])
def test_slang_and_dehumanising_posts_are_blocked_and_their_twins_pass(unsafe, edgy):
    assert not local.safety_verdict(content=unsafe).safe
    assert local.safety_verdict(content=edgy).safe


@pytest.mark.parametrize(
    ("unsafe", "edgy"),
    [
        (
            "Selling infostealer logs by the thousand, bank sessions included.",
            "Hiring a malware analyst to reverse engineer infostealer samples and write YARA rules.",
        ),
        (
            "Guaranteed returns of 3% a day, bring friends and earn more.",
            "News: regulators warn about schemes that promise guaranteed returns of 3% a day.",
        ),
    ],
)
def test_the_old_term_list_is_defused_like_a_category_phrase(unsafe, edgy):
    assert not local.safety_verdict(content=unsafe).safe
    assert local.safety_verdict(content=edgy).safe


def test_the_training_only_cases_train_but_stay_out_of_the_benchmark():
    extra = load_cases(EXTRA_TRAINING)
    benchmark = {case["text"] for case in load_cases()}
    trained = {json.loads(line)["text"] for line in training_lines().splitlines()}
    assert {case["lang"] for case in extra} == {"en", "zh", "ja"}
    assert {case["label"] for case in extra} == {"unsafe", "edgy", "normal"}
    assert all(case["text"] in trained and case["text"] not in benchmark for case in extra)
    tested = [text for pair in TWINS + SLANG_TWINS + THIRD_PASS_TWINS for text in pair]
    tested += FOURTH_PASS_BLOCKED + FOURTH_PASS_PASSED
    assert not set(tested) & (trained | benchmark)


def test_the_probe_set_is_never_trained_on():
    trained = {json.loads(line)["text"] for line in training_lines().splitlines()}
    probe = load_cases(PROBE_SET)
    assert len(probe) == 80
    assert not {case["text"] for case in probe} & trained


def test_the_classifier_reads_single_chinese_and_japanese_characters():
    indices, _ = features("枪")
    assert len(indices) == 1


def test_the_classifier_does_not_read_the_lexicons_idioms():
    """ "kill the process" is removed before the n-grams are taken, as the rules remove it."""
    assert np.array_equal(
        features("If the worker hangs, kill the process and restart it.")[0],
        features("If the worker hangs,   and restart it.")[0],
    )


def test_function_words_are_not_features():
    """Short chatty posts were judged unsafe because the unsafe examples are full sentences: "the" weighed in."""
    assert len(features("the and you if")[0]) == 0
    assert len(features("の")[0]) == 0


@pytest.mark.parametrize(
    "text",
    [
        "Shoot me a message if you want the slides.",
        "Kill the stuck pod and let the deployment recreate it.",
        "The build is dead again, someone broke the lockfile.",
        "Nuke the node_modules folder and reinstall, that fixed it for me.",
        "ゾンビプロセスを殺してからジョブを再実行してください。",
    ],
)
def test_short_posts_with_violent_idioms_pass(text):
    assert local.safety_verdict(content=text).safe


# The fourth pass: English offers worded in everyday words, read through four- and five-letter n-grams and more
# training-only cases; a refused defuser ("no hotlines") that no longer defuses; an idiom. Each text was judged
# wrongly before this pass.
FOURTH_PASS_BLOCKED = [
    "Customer list from a hacked clinic for sale: 90k patients with addresses and insurance numbers, bulk or per city.",
    "Got a crew to shake down the shop owners on our street, the ones who don't pay get a visit after closing.",
    "Group for people who are done, pick a date with us, no hotlines.",
]
FOURTH_PASS_PASSED = [
    "这个新出的编辑器真是杀手级工具，打开大文件毫无压力。",
    "We help people who were doxxed get their address off search sites and file police reports.",
]


@pytest.mark.parametrize("text", FOURTH_PASS_BLOCKED)
def test_fourth_pass_everyday_offers_are_blocked(text):
    assert not local.safety_verdict(content=text).safe


@pytest.mark.parametrize("text", FOURTH_PASS_PASSED)
def test_fourth_pass_idioms_and_doxxing_victims_pass(text):
    assert local.safety_verdict(content=text).safe


@pytest.mark.parametrize(
    ("refused", "kept"),
    [
        ("Pick a date with us, no hotlines, serious only.", "Pick a date with us: the hotline training starts soon."),
        ("Don't send me to a crisis line, I have decided.", "If it gets dark, send a text to the crisis line."),
        ("一起走吧，不要心理咨询。", "学校提供免费心理咨询。"),
    ],
)
def test_a_refused_defuser_does_not_defuse(refused, kept):
    assert not defused(fold(refused))
    assert defused(fold(kept))


def test_a_minors_age_written_as_a_number_meets_the_hard_rule():
    verdict = local.safety_verdict(content="Paying 16yo girls for nudes, keep it secret from your parents.")
    assert not verdict.safe and verdict.flag == "child_safety"
    assert local.safety_verdict(content="Swimming lessons for 8yo kids, Saturday mornings, small groups.").safe


def test_english_words_are_read_in_four_and_five_letters():
    """Three letters ("ing", " co") are shared by every kind of post; a word of three letters still counts whole."""
    assert len(features("gun")[0]) == 4  # the word, " gun", "gun " and " gun "
    assert set(features("smuggling")[0]) == set(features("smuggling smuggling")[0])


@pytest.mark.parametrize(
    ("text", "category"),
    [("0day for sale, browser RCE, escrow ok", "malware"), ("Dumps with track1 and pin, EU bins", "carding")],
)
def test_lexicon_terms_with_digits_are_folded_as_the_text_is(text, category):
    """The text is folded ("0day" reads "oday"); a term written with the same digits matches it."""
    assert category in {hit.category for hit in rule_hits(fold(text)) if hit.kind != "term"}


@pytest.mark.parametrize(
    "text",
    [
        "Our CI keeps getting OOM-killed on the Docker build step; anyone tuned the memory limit for BuildKit?",
        "How do I kill a zombie process that ignores SIGTERM on Ubuntu 24.04?",
        "这个新出的数据库真是杀手级应用，写入性能比 MySQL 高三倍。",
        "このバグには本当に殺されそう。Rustのライフタイムに詳しい方、助けてください。",
    ],
)
def test_engineering_jargon_with_violent_words_is_neither_blocked_nor_held(text, settings):
    """Operations talk (OOM kills, killing processes, 杀手级 "killer" features) reaches readers: not blocked, and
    below the review queue's safety risk, so no moderator has to wade through it."""
    verdict = local.safety_verdict(content=text)
    assert verdict.safe and verdict.risk < settings.REVIEW_SAFETY_RISK, verdict


@pytest.mark.parametrize(
    "text",
    [
        "朋友被人肉后电话被打爆，我们帮她把泄露的资料从各个网站清理掉，也陪她去维权。",
        "防盗号小课堂：三步给你的游戏账号加上保护，再也不怕被盗。",
    ],
)
def test_help_for_victims_of_doxxing_and_account_theft_is_not_blocked(text):
    """被人肉 (was doxxed), 维权 (standing up for one's rights), 防盗号 (anti account theft): the victim's side."""
    assert local.safety_verdict(content=text).safe


NEWS_OF_AN_ATTACK = "ニュース：県内の高校で刃物を持った男が侵入、生徒一人が軽傷、男はその場で逮捕された。"


def test_a_report_the_blend_reads_as_safe_is_not_held_on_the_ngram_estimate_alone(settings):
    """A news report (a defusing word: ニュース, 逮捕) that only the n-gram layer finds risky takes the blend's risk;
    with SAFETY_LOCAL_BLEND_CLEARS_DEFUSED off it is held for review as before."""
    verdict = local.safety_verdict(content=NEWS_OF_AN_ATTACK)
    assert verdict.safe and verdict.risk < settings.REVIEW_SAFETY_RISK, verdict
    settings.SAFETY_LOCAL_BLEND_CLEARS_DEFUSED = False
    # Off, the risk is the n-gram estimate, halved for want of a rule: what the blend replaced.
    ngram = classifier().risk(NEWS_OF_AN_ATTACK)[0]
    off = local.safety_verdict(content=NEWS_OF_AN_ATTACK)
    assert off.risk == pytest.approx(ngram * UNSUPPORTED_LEARNED_RISK, abs=1e-3)
    assert off.risk > verdict.risk + 0.1


def test_an_offer_behind_a_defusing_word_is_blocked_not_held(settings):
    """ "News" elsewhere in the post does not defuse a first-person offer ("I sell …") beside the phrase: blocked
    (test_local_safety_benign.py has more)."""
    offer = "News for the crew: I sell pipe bomb kits with step by step instructions, DM me."
    verdict = local.safety_verdict(content=offer)
    assert not verdict.safe and verdict.risk >= settings.SAFETY_LOCAL_BLOCK_THRESHOLD, verdict


def test_the_blend_only_lowers_a_defused_risk_between_the_rules_and_the_block_threshold(settings):
    """It changes no block (a risk at the threshold stays), never goes below what the rules found, and leaves
    texts without a defusing word, or every text with the setting off, alone."""
    from pipeline.llm.local.safety import _blend_clears

    block = settings.SAFETY_LOCAL_BLOCK_THRESHOLD
    assert _blend_clears(0.4, 0.0, True)
    assert not _blend_clears(block, 0.0, True)
    assert not _blend_clears(0.4, 0.4, True)
    assert not _blend_clears(0.4, 0.0, False)
    settings.SAFETY_LOCAL_BLEND_CLEARS_DEFUSED = False
    assert not _blend_clears(0.4, 0.0, True)
