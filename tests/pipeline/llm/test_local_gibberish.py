"""The gibberish verdict (pipeline.llm.local.extraction.is_gibberish) on Chinese and Japanese posts whose Latin words
are product names and acronyms: they were discarded as keyboard mashing (three of 135 ordinary posts of a feed
network written apart, bench/data/feed_apart_dev/). Mashing in Latin script is still caught."""

from __future__ import annotations

import pytest

from pipeline.llm.local.extraction import extract, is_gibberish

CJK_WITH_NAMES = [
    "出租 RTX 4090 和 H100 节点，NVLink 互联，支持 IB 网络，按小时计费，深圳机房，学校九折。",
    "漏洞提醒：某 MCP 服务器 1.2 版可经符号链接读取 ~/.ssh 下的文件，已在 1.3 修复，请尽快升级。",
    "测了 HNSW 参数：Qdrant、Milvus、pgvector 三家在 500 万条向量上的 QPS 和内存，脚本已开源。",
    "GPU クラスタ貸します。RTX 6000 Ada ×8、NVMe 4TB、SSH 接続、東京リージョン、月額 48 万円から。",
]


@pytest.mark.parametrize("text", CJK_WITH_NAMES)
def test_cjk_post_with_acronyms_is_not_gibberish(text):
    assert not is_gibberish(text)
    assert extract(content=text).discard_reason == ""


@pytest.mark.parametrize(
    "text",
    [
        "gjkdfg hjsdf wqrtyp mnbvcx zzzkkk plkmnj",
        "好的 gjkdfg hjsdf wqrtyp mnbvcx zzzkkk plkmnj",
        "GJKDFGHS HJSDFKLQ WQRTYPLM MNBVCXZK",
        "QWRTZP XCVBNM HJKLDF SDFGHJ",
        "QWRTZ XCVBN HJKLD SDFGH",
        "sdfGHk qwRTpl zxCVbn mnbVCx",
    ],
)
def test_latin_mashing_is_still_gibberish(text):
    assert is_gibberish(text)
