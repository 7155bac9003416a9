"""A synthetic warehouse-scale catalog: hundreds of tables to find the right few in.

The sample warehouse has eight tables; real ones have hundreds, named by
layer (``ods`` raw logs, ``dwd`` detail facts, ``dws`` summaries, ``ads``
reports, ``dim`` dimensions), full of near-duplicates (daily, hourly and
monthly grains of the same facts) and deprecated leftovers (``_old``,
``tmp_*_bak``). ``add_catalog`` adds such a catalog to a DuckDB warehouse:
empty tables with realistic columns and bilingual comments, lineage rows in
``meta_table_lineage``, and it returns an evaluation set of questions with
the tables that answer them, so table recall can be measured at scale.

Everything is derived from a seed, so the same size and seed always give the
same tables and questions. The questions use the words analysts use (often
synonyms, never the table name), and they include questions about the core
sample tables, which must still be found among the decoys.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import yaml

Column = tuple[str, str, str, str]
"""(name, DuckDB type, Chinese comment, English comment)."""


@dataclass(frozen=True)
class Domain:
    """A subject area of the warehouse and the words people use for it."""

    slug: str
    zh: str
    en: str
    synonyms: tuple[str, ...]
    entity: tuple[str, str, str]
    """(id column, Chinese name, English name) of the thing the dim table lists."""
    measures: tuple[tuple[str, str, str], ...]
    """(column, Chinese, English) additive measures of the domain."""


def _d(
    slug: str,
    zh: str,
    en: str,
    synonyms: str,
    entity: tuple[str, str, str],
    measures: tuple[tuple[str, str, str], ...],
) -> Domain:
    return Domain(slug, zh, en, tuple(synonyms.split()), entity, measures)


DOMAINS: tuple[Domain, ...] = (
    _d(
        "guild",
        "公会",
        "guild",
        "帮派 联盟 战队",
        ("guild_id", "公会", "guild"),
        (("member_cnt", "公会成员数", "members"), ("donate_cnt", "公会捐献次数", "donations")),
    ),
    _d(
        "guild_war",
        "公会战",
        "guild war",
        "帮战 联盟战 攻城战",
        ("war_id", "公会战场次", "war"),
        (("join_users", "公会战参与人数", "participants"), ("win_cnt", "公会战胜场", "wins")),
    ),
    _d(
        "battle",
        "对局",
        "match",
        "战斗 比赛 PVP",
        ("mode_id", "对局模式", "match mode"),
        (("match_cnt", "对局场次", "matches"), ("avg_duration_sec", "平均对局时长秒", "avg secs")),
    ),
    _d(
        "rank",
        "排位赛",
        "ranked",
        "天梯 段位 排位",
        ("tier_id", "段位", "tier"),
        (
            ("ranked_users", "排位参与人数", "ranked players"),
            ("promote_cnt", "晋级次数", "promotions"),
        ),
    ),
    _d(
        "chat",
        "聊天",
        "chat",
        "发言 私聊 世界频道",
        ("channel_type", "聊天频道", "chat channel"),
        (("msg_cnt", "聊天消息数", "messages"), ("speaker_cnt", "发言人数", "speakers")),
    ),
    _d(
        "mail",
        "邮件",
        "mail",
        "信件 系统邮件 邮箱",
        ("mail_type", "邮件类型", "mail type"),
        (
            ("sent_cnt", "邮件发送数", "mails sent"),
            ("claim_cnt", "附件领取数", "attachments claimed"),
        ),
    ),
    _d(
        "shop",
        "商城",
        "shop",
        "商店 礼包商店 购买",
        ("goods_id", "商品", "goods"),
        (("buy_cnt", "商品购买次数", "purchases"), ("buyer_cnt", "购买人数", "buyers")),
    ),
    _d(
        "gacha",
        "抽卡",
        "gacha",
        "扭蛋 卡池 十连",
        ("pool_id", "卡池", "gacha pool"),
        (("draw_cnt", "抽卡次数", "draws"), ("ssr_cnt", "出SSR次数", "ssr drops")),
    ),
    _d(
        "ad_spend",
        "买量投放",
        "user acquisition",
        "广告投放 投放消耗 买量 获客",
        ("campaign_id", "广告计划", "campaign"),
        (("cost", "投放消耗金额", "spend"), ("click_cnt", "广告点击数", "clicks")),
    ),
    _d(
        "device",
        "设备",
        "device",
        "机型 手机型号 终端",
        ("device_model", "机型", "device model"),
        (("device_cnt", "设备数", "devices"), ("new_device_cnt", "新增设备数", "new devices")),
    ),
    _d(
        "server",
        "区服",
        "server",
        "服务器 新服 合服",
        ("server_id", "区服", "server"),
        (("online_peak", "最高在线人数", "peak concurrent users"), ("role_cnt", "角色数", "roles")),
    ),
    _d(
        "level",
        "关卡",
        "stage",
        "副本 关卡进度 闯关",
        ("stage_id", "关卡", "stage"),
        (("clear_cnt", "通关次数", "clears"), ("fail_cnt", "失败次数", "fails")),
    ),
    _d(
        "quest",
        "任务",
        "quest",
        "主线任务 日常任务 成就",
        ("quest_id", "任务", "quest"),
        (("finish_cnt", "任务完成次数", "completions"), ("accept_cnt", "任务接取次数", "accepts")),
    ),
    _d(
        "activity",
        "活动参与",
        "event participation",
        "运营活动参与 活动玩法 限时活动",
        ("activity_id", "活动", "event"),
        (
            ("join_users", "活动参与人数", "participants"),
            ("reward_cnt", "活动奖励发放数", "rewards"),
        ),
    ),
    _d(
        "currency",
        "货币",
        "currency",
        "钻石 金币 虚拟货币 元宝",
        ("currency_type", "货币类型", "currency type"),
        (
            ("gain_amount", "货币产出量", "amount gained"),
            ("cost_amount", "货币消耗量", "amount spent"),
        ),
    ),
    _d(
        "ltv",
        "生命周期价值",
        "lifetime value",
        "LTV 用户价值 回本",
        ("cohort_ds", "注册批次", "cohort"),
        (("ltv_7d", "7日LTV", "7-day LTV"), ("ltv_30d", "30日LTV", "30-day LTV")),
    ),
    _d(
        "churn",
        "流失",
        "churn",
        "流失用户 沉默用户 回流",
        ("churn_type", "流失类型", "churn type"),
        (
            ("churn_users", "流失用户数", "churned users"),
            ("return_users", "回流用户数", "returning users"),
        ),
    ),
    _d(
        "cs_ticket",
        "客服工单",
        "support ticket",
        "投诉 客服 工单 反馈",
        ("ticket_type", "工单类型", "ticket type"),
        (("ticket_cnt", "工单数", "tickets"), ("resolved_cnt", "已解决工单数", "resolved")),
    ),
    _d(
        "anticheat",
        "外挂检测",
        "anti-cheat",
        "作弊 封号 外挂 封禁",
        ("rule_id", "检测规则", "detection rule"),
        (("hit_cnt", "命中次数", "hits"), ("ban_cnt", "封禁账号数", "bans")),
    ),
    _d(
        "push",
        "推送",
        "push notification",
        "消息推送 召回推送 通知",
        ("push_id", "推送任务", "push task"),
        (("send_cnt", "推送发送数", "pushes sent"), ("open_cnt", "推送打开数", "opens")),
    ),
    _d(
        "friend",
        "好友",
        "friend",
        "社交 好友关系 组队",
        ("relation_type", "关系类型", "relation type"),
        (("add_cnt", "加好友次数", "friend adds"), ("team_cnt", "组队次数", "team-ups")),
    ),
    _d(
        "season_pass",
        "战令",
        "season pass",
        "通行证 赛季手册 battle pass",
        ("pass_id", "战令档位", "pass tier"),
        (
            ("buyer_cnt", "战令购买人数", "pass buyers"),
            ("level_up_cnt", "战令升级次数", "level-ups"),
        ),
    ),
    _d(
        "crash",
        "崩溃",
        "crash",
        "闪退 卡死 客户端异常",
        ("crash_type", "崩溃类型", "crash type"),
        (("crash_cnt", "崩溃次数", "crashes"), ("crash_users", "崩溃用户数", "affected users")),
    ),
    _d(
        "latency",
        "网络延迟",
        "network latency",
        "卡顿 ping 网络质量 延迟",
        ("idc", "机房", "data center"),
        (("p95_ms", "P95延迟毫秒", "p95 ms"), ("lag_users", "卡顿用户数", "lagging users")),
    ),
    _d(
        "refund",
        "退款",
        "refund",
        "退单 退费 拒付",
        ("refund_reason", "退款原因", "refund reason"),
        (("refund_cnt", "退款笔数", "refunds"), ("refund_amount", "退款金额", "refund amount")),
    ),
    _d(
        "vip",
        "VIP等级",
        "vip level",
        "贵宾 会员等级 大R",
        ("vip_level", "VIP等级", "VIP level"),
        (("vip_users", "VIP用户数", "VIP users"), ("upgrade_cnt", "VIP升级次数", "upgrades")),
    ),
    _d(
        "pet",
        "宠物",
        "pet",
        "萌宠养成 宠物培养 灵宠",
        ("pet_id", "宠物", "pet"),
        (("hatch_cnt", "孵化次数", "hatches"), ("upgrade_cnt", "宠物升级次数", "pet upgrades")),
    ),
    _d(
        "hero",
        "英雄",
        "hero",
        "角色卡 武将 英雄养成",
        ("hero_id", "英雄", "hero"),
        (("pick_cnt", "英雄出场次数", "picks"), ("win_cnt", "英雄胜场", "hero wins")),
    ),
    _d(
        "equipment",
        "装备",
        "equipment",
        "武器 强化 锻造 装备打造",
        ("equip_id", "装备", "equipment"),
        (("enhance_cnt", "强化次数", "enhancements"), ("forge_cnt", "锻造次数", "forges")),
    ),
    _d(
        "item_flow",
        "道具流水",
        "item flow",
        "背包 道具产出 道具消耗",
        ("item_id", "道具", "item"),
        (("gain_cnt", "道具获得数", "items gained"), ("use_cnt", "道具使用数", "items used")),
    ),
    _d(
        "register",
        "注册",
        "registration",
        "开户 注册账号 新账号",
        ("account_type", "账号类型", "account type"),
        (
            ("register_cnt", "注册账号数", "registrations"),
            ("verified_cnt", "实名认证数", "verified"),
        ),
    ),
    _d(
        "role_create",
        "创角",
        "role creation",
        "创建角色 新建角色 建角",
        ("profession_id", "职业", "class"),
        (("create_cnt", "创角数", "roles created"), ("create_users", "创角用户数", "creators")),
    ),
    _d(
        "online",
        "在线",
        "online",
        "同时在线 在线人数 PCU",
        ("server_id", "区服", "server"),
        (("pcu", "最高同时在线", "peak concurrent"), ("acu", "平均同时在线", "average concurrent")),
    ),
    _d(
        "tutorial",
        "新手引导",
        "tutorial",
        "新手教程 引导步骤 新手流程",
        ("guide_step", "引导步骤", "tutorial step"),
        (("reach_users", "到达人数", "users reached"), ("skip_cnt", "跳过次数", "skips")),
    ),
    _d(
        "survey",
        "问卷",
        "survey",
        "调研 满意度 用户调查",
        ("survey_id", "问卷", "survey"),
        (("answer_cnt", "答卷数", "responses"), ("nps", "NPS得分", "NPS")),
    ),
    _d(
        "live_stream",
        "直播",
        "live stream",
        "主播 直播间 弹幕",
        ("room_id", "直播间", "stream room"),
        (("viewer_cnt", "观看人数", "viewers"), ("gift_amount", "打赏金额", "tips")),
    ),
    _d(
        "redeem",
        "兑换码",
        "redeem code",
        "礼包码 CDK 激活码",
        ("batch_id", "兑换码批次", "code batch"),
        (("redeem_cnt", "兑换次数", "redemptions"), ("redeem_users", "兑换人数", "redeemers")),
    ),
    _d(
        "invite",
        "邀请",
        "referral",
        "拉新 邀请好友 分享裂变",
        ("invite_type", "邀请方式", "referral type"),
        (
            ("invite_cnt", "邀请次数", "invites"),
            ("invited_new", "邀请新增用户数", "referred new users"),
        ),
    ),
    _d(
        "ad_monetize",
        "广告变现",
        "ad monetization",
        "激励视频 看广告 广告收入",
        ("ad_unit", "广告位", "ad unit"),
        (("impression_cnt", "广告展示数", "impressions"), ("ad_revenue", "广告收入", "ad revenue")),
    ),
    _d(
        "hotfix",
        "热更新",
        "hotfix",
        "补丁 热更 资源下载",
        ("patch_version", "补丁版本", "patch version"),
        (
            ("download_cnt", "补丁下载次数", "patch downloads"),
            ("fail_cnt", "热更失败次数", "patch failures"),
        ),
    ),
    _d(
        "skin_owner",
        "时装持有",
        "skin ownership",
        "皮肤拥有 外观 时装",
        ("skin_id", "时装", "skin"),
        (("owner_cnt", "持有人数", "owners"), ("equip_cnt", "穿戴次数", "wears")),
    ),
    _d(
        "team_dungeon",
        "组队副本",
        "team dungeon",
        "团本 多人副本 团队副本",
        ("dungeon_id", "副本", "dungeon"),
        (("run_cnt", "副本次数", "runs"), ("clear_rate", "通关率", "clear rate")),
    ),
    _d(
        "marriage",
        "结婚系统",
        "marriage",
        "情缘 结婚 伴侣",
        ("ring_type", "戒指类型", "ring type"),
        (("wedding_cnt", "婚礼次数", "weddings"), ("divorce_cnt", "离婚次数", "divorces")),
    ),
    _d(
        "auction",
        "拍卖行",
        "auction house",
        "交易行 摆摊 玩家交易",
        ("category_id", "交易品类", "trade category"),
        (("trade_cnt", "成交笔数", "trades"), ("trade_amount", "成交金额", "trade value")),
    ),
)

_COMMON: tuple[Column, ...] = (
    ("ds", "DATE", "日期分区", "Date partition"),
    ("game_id", "INTEGER", "游戏ID，关联 dim_game", "Game id, joins dim_game"),
)
_CHANNEL: Column = ("channel_id", "INTEGER", "渠道ID，关联 dim_channel", "Channel id")
_UID: Column = ("uid", "BIGINT", "用户ID", "User id")


@dataclass(frozen=True)
class Variant:
    """One table shape every domain gets: a layer, a grain and the words that ask for it."""

    key: str
    name: str
    zh: str
    en: str
    asks: tuple[str, ...]
    """Question templates; ``{x}`` is a word for the domain, ``{m}`` one of its measures."""


VARIANTS: tuple[Variant, ...] = (
    Variant("ods", "ods_{s}_log_di", "{zh}原始日志（贴源层，按天分区，未清洗）",
            "Raw {en} log (ODS, daily partition, uncleaned)",
            ("{x}的原始日志在哪张表", "想看{x}未清洗的原始上报日志")),
    Variant("dwd", "dwd_{s}_detail_di", "{zh}明细事实表：每条{zh}记录一行",
            "{en} detail facts, one row per record",
            ("查一下{x}的逐条明细记录", "{x}明细数据，要每一条记录")),
    Variant("dwd_hi", "dwd_{s}_detail_hi", "{zh}小时明细（按小时分区，实时链路）",
            "{en} hourly detail (hourly partition, near real time)",
            ("{x}按小时的实时明细", "今天每小时的{x}明细")),
    Variant("dws_game", "dws_{s}_game_1d", "{zh}按游戏日汇总：每日每个游戏的{m}",
            "Daily {en} summary per game",
            ("各游戏每天的{m}", "{x}每日{m}汇总，按游戏")),
    Variant("dws_channel", "dws_{s}_channel_1d", "{zh}按渠道日汇总：每日每个游戏每个渠道的{m}",
            "Daily {en} summary per game and channel",
            ("按渠道拆分{x}的{m}", "不同渠道每天的{m}")),
    Variant("dws_user", "dws_{s}_user_1d", "{zh}用户粒度日汇总：每个用户每天的{m}",
            "Daily {en} summary per user",
            ("每个玩家每天的{m}", "{x}用户级别的{m}，精确到uid")),
    Variant("dws_month", "dws_{s}_game_1m", "{zh}按游戏月汇总：每月每个游戏的{m}",
            "Monthly {en} summary per game",
            ("{x}每个月的{m}", "{x}月度{m}统计")),
    Variant("ads_report", "ads_{s}_report_di", "{zh}日报（应用层报表，供看板展示）",
            "{en} daily report (ADS, for dashboards)",
            ("{x}日报报表", "{x}看板用的日报数据")),
    Variant("ads_weekly", "ads_{s}_weekly_wi", "{zh}周报（应用层报表，每周一更新）",
            "{en} weekly report (ADS, refreshed on Mondays)",
            ("{x}周报", "每周{x}报表")),
    Variant("dim", "dim_{s}_config", "{ez}维表：{ez}配置与属性，每个{ez}一行",
            "{een} dimension: configuration and attributes",
            ("{ez}配置表", "有哪些{ez}，它们的属性和配置")),
    Variant("old", "dws_{s}_game_1d_old", "【已废弃，请改用 dws_{s}_game_1d】{zh}日汇总旧版",
            "Deprecated: old daily {en} summary, use dws_{s}_game_1d", ()),
    Variant("bak", "tmp_{s}_detail_bak", "临时备份表（已废弃，不再更新）{zh}明细备份",
            "Temporary backup of {en} detail, deprecated, no longer updated", ()),
)  # fmt: skip


@dataclass(frozen=True)
class CatalogTable:
    """One generated table: name, comments, columns and the domain it belongs to."""

    name: str
    comment: str
    columns: tuple[Column, ...]
    domain: str
    variant: str

    def ddl(self) -> str:
        """The ``CREATE TABLE`` statement (DuckDB)."""
        cols = ", ".join(f"{c[0]} {c[1]}" for c in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {self.name} ({cols})"


@dataclass(frozen=True)
class EvalQuestion:
    """A question and the tables that answer it."""

    question: str
    tables: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON/YAML-safe form."""
        return {"question": self.question, "tables": list(self.tables)}


def _fmt(template: str, d: Domain, **extra: str) -> str:
    return template.format(
        s=d.slug,
        zh=d.zh,
        en=d.en,
        ez=d.entity[1],
        een=d.entity[2],
        m="、".join(m[1] for m in d.measures),
        **extra,
    )


def _columns(d: Domain, v: Variant) -> tuple[Column, ...]:
    id_col, ent_zh, ent_en = d.entity
    entity: Column = (id_col, "VARCHAR", f"{ent_zh}ID/编码", f"{ent_en} id")
    measures: tuple[Column, ...] = tuple(
        (c, "DOUBLE" if "rate" in c or "amount" in c or c in {"cost", "nps"} else "BIGINT", z, e)
        for c, z, e in d.measures
    )
    if v.key == "dim":
        return (
            entity,
            ("name", "VARCHAR", f"{ent_zh}名称", f"{ent_en} name"),
            ("category", "VARCHAR", f"{ent_zh}分类", f"{ent_en} category"),
            ("online_date", "DATE", "上线日期", "Online date"),
            ("is_valid", "BOOLEAN", "是否有效", "Is valid"),
        )
    if v.key in {"ods", "dwd", "dwd_hi", "bak"}:
        hour: tuple[Column, ...] = (("hh", "INTEGER", "小时", "Hour"),) if v.key == "dwd_hi" else ()
        raw: tuple[Column, ...] = (
            (("raw_json", "VARCHAR", "原始上报JSON", "Raw payload JSON"),) if v.key == "ods" else ()
        )
        return (
            *_COMMON,
            *hour,
            _UID,
            _CHANNEL,
            entity,
            ("event_time", "TIMESTAMP", "事件时间", "Event time"),
            *raw,
        )
    if v.key == "dws_channel":
        return (*_COMMON, _CHANNEL, *measures)
    if v.key == "dws_user":
        return (*_COMMON, _UID, *measures)
    return (*_COMMON, entity, *measures)


def catalog_tables(size: int = 500) -> list[CatalogTable]:
    """The tables of a catalog of at least ``size`` tables (whole domains are added).

    Raises:
        ValueError: ``size`` is not positive or larger than the domains allow.
    """
    if size <= 0:
        msg = f"catalog size must be positive, got {size}"
        raise ValueError(msg)
    per_domain = len(VARIANTS)
    capacity = per_domain * len(DOMAINS)
    if size > capacity:
        msg = f"catalog size {size} exceeds the {capacity} tables the domains define"
        raise ValueError(msg)
    wanted = -(-size // per_domain)
    tables: list[CatalogTable] = []
    for d in DOMAINS[:wanted]:
        for v in VARIANTS:
            name = _fmt(v.name, d)
            comment = f"{_fmt(v.zh, d)} / {_fmt(v.en, d)}"
            if d.synonyms and v.key not in {"old", "bak"}:
                known = d.synonyms if v.key == "dws_game" else d.synonyms[:2]
                comment = comment.replace(" / ", f"（又称{'、'.join(known)}） / ", 1)
            tables.append(CatalogTable(name, comment, _columns(d, v), d.slug, v.key))
    return tables


_CORE_QUESTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("星海远征上个月流水多少", ("dws_game_pay_di",)),
    ("幻境物语近7天日活", ("dws_game_active_di",)),
    ("各游戏付费率", ("dws_game_pay_di", "dws_game_active_di")),
    ("机甲风暴的次日留存", ("dwd_user_login_di",)),
    ("华为渠道SDK登录转化漏斗", ("dws_sdk_funnel_di",)),
    ("为什么8月流水暴涨，有什么运营活动", ("ops_events", "dws_game_pay_di")),
    ("游戏的上线日期和运营状态", ("dim_game",)),
    ("渠道编码和渠道类型", ("dim_channel",)),
    ("这张表的上游是什么，ETL口径", ("meta_table_lineage",)),
    ("最近有哪些停服维护公告", ("announcements",)),
    ("Star Expedition revenue last month", ("dws_game_pay_di",)),
    ("daily active users by channel", ("dws_game_active_di",)),
    ("用户在线时长分布", ("dwd_user_login_di",)),
    ("皮肤和月卡的流水占比", ("dws_game_pay_di",)),
)


def eval_questions(size: int = 500, seed: int = 7) -> list[EvalQuestion]:
    """Questions with the tables that answer them, for a catalog of ``size`` tables.

    Two questions per domain ask for different variants, phrased with the
    domain's synonyms; a few ask for two tables at once; the core sample
    questions come last.
    """
    rng = random.Random(seed)
    tables = catalog_tables(size)
    domains = [d for d in DOMAINS if any(t.domain == d.slug for t in tables)]
    askable = [v for v in VARIANTS if v.asks]
    out: list[EvalQuestion] = []
    for d in domains:
        words = (d.zh, *d.synonyms)
        for v in rng.sample(askable, 2):
            template = rng.choice(v.asks)
            measure = rng.choice(d.measures)[1]
            question = template.format(x=rng.choice(words), m=measure, ez=d.entity[1])
            out.append(EvalQuestion(question, (_fmt(v.name, d),)))
    for a, b in zip(domains[::2], domains[1::2], strict=False):
        ma, mb = a.measures[0][1], b.measures[0][1]
        out.append(
            EvalQuestion(
                f"各游戏每天的{ma}和{mb}放在一起看",
                (f"dws_{a.slug}_game_1d", f"dws_{b.slug}_game_1d"),
            )
        )
    out.extend(EvalQuestion(q, t) for q, t in _CORE_QUESTIONS)
    return out


_MEASURE_TYPES = frozenset({"BIGINT", "DOUBLE"})


def _lineage(tables: list[CatalogTable]) -> list[tuple[str, str, str]]:
    by_domain: dict[str, dict[str, CatalogTable]] = {}
    for t in tables:
        by_domain.setdefault(t.domain, {})[t.variant] = t
    rows: list[tuple[str, str, str]] = []

    def add(target: CatalogTable, source: CatalogTable, extra_join: str = "") -> None:
        src_cols = {c[0] for c in source.columns}
        keys = [
            c[0]
            for c in target.columns
            if c[0] in src_cols and (c[1] not in _MEASURE_TYPES or c[0] == "uid")
        ]
        aggs = [
            f"SUM({c[0]}) AS {c[0]}"
            if c[0] in src_cols
            else f"COUNT(DISTINCT uid) AS {c[0]}"
            if c[0].endswith("users")
            else f"COUNT(*) AS {c[0]}"
            for c in target.columns
            if c[0] not in keys and c[1] in _MEASURE_TYPES
        ]
        select = (
            ", ".join(f"s.{k}" for k in keys) + (", " if keys and aggs else "") + ", ".join(aggs)
        )
        group = f"\nGROUP BY {', '.join(f's.{k}' for k in keys)}" if aggs and keys else ""
        sql = (
            f"INSERT OVERWRITE TABLE {target.name} PARTITION (ds = '${{ds}}')\n"
            f"SELECT {select or '*'}\nFROM {source.name} s{extra_join}\n"
            f"WHERE s.ds = '${{ds}}'{group}"
        )
        rows.append((target.name, source.name, sql))

    for parts in by_domain.values():
        ods, dwd, dim = parts.get("ods"), parts.get("dwd"), parts.get("dim")
        if ods and dwd:
            join = ""
            if dim:
                join = f"\nJOIN {dim.name} d ON d.{dwd.columns[-2][0]} = s.{dwd.columns[-2][0]}"
            add(dwd, ods, join)
            if dim:
                rows.append((dwd.name, dim.name, f"-- {dim.name} is joined in the ods row"))
        if ods and "dwd_hi" in parts:
            add(parts["dwd_hi"], ods)
        if dwd:
            for key in ("dws_game", "dws_channel", "dws_user", "bak"):
                if key in parts:
                    add(parts[key], dwd)
        game = parts.get("dws_game")
        if game:
            for key in ("dws_month", "ads_report", "ads_weekly", "old"):
                if key in parts:
                    add(parts[key], game)
    return rows


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def add_catalog(path: Path, size: int = 500, *, seed: int = 7) -> list[EvalQuestion]:
    """Add a synthetic catalog of ``size``+ tables to the DuckDB warehouse at ``path``.

    Creates the tables (empty, commented), appends their lineage to
    ``meta_table_lineage`` (created when missing), writes the evaluation set
    beside the warehouse (``<stem>.catalog-eval.yaml``) and returns it.
    Running it twice is harmless: tables already there are kept, lineage rows
    of catalog tables are replaced.
    """
    tables = catalog_tables(size)
    with duckdb.connect(str(path)) as con:
        con.execute("BEGIN")
        for t in tables:
            con.execute(t.ddl())
            con.execute(f"COMMENT ON TABLE {t.name} IS {_text(t.comment)}")
            for name, _type, zh, en in t.columns:
                con.execute(f"COMMENT ON COLUMN {t.name}.{name} IS {_text(f'{zh} / {en}')}")
        con.execute(
            "CREATE TABLE IF NOT EXISTS meta_table_lineage "
            "(table_name VARCHAR, upstream_table VARCHAR, etl_sql VARCHAR)"
        )
        names = [t.name for t in tables]
        con.execute("DELETE FROM meta_table_lineage WHERE list_contains(?, table_name)", [names])
        con.executemany("INSERT INTO meta_table_lineage VALUES (?, ?, ?)", _lineage(tables))
        con.execute("COMMIT")
        con.execute("CHECKPOINT")
    questions = eval_questions(size, seed)
    eval_path(path).write_text(
        yaml.safe_dump(
            {"size": size, "seed": seed, "questions": [q.to_dict() for q in questions]},
            allow_unicode=True,
            sort_keys=False,
        ),
        encoding="utf-8",
    )
    return questions


def eval_path(warehouse: Path) -> Path:
    """Where ``add_catalog`` writes the evaluation set of the warehouse at ``warehouse``."""
    return warehouse.with_name(f"{warehouse.stem}.catalog-eval.yaml")


def load_eval(path: Path) -> list[EvalQuestion]:
    """Read an evaluation set written by ``add_catalog``."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return [EvalQuestion(str(q["question"]), tuple(q["tables"])) for q in data.get("questions", [])]
