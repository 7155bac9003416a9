"""Table definitions of the sample warehouse: names, types and bilingual comments.

The comments are the only documentation the agent sees when it browses the
catalog, so each one says what a row means, the unit and the allowed values,
in Chinese first and English second (``中文说明 / English description``). The
same specs create the DuckDB tables and are checked by the tests, so there is
one place to change a column.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ColumnSpec:
    """One column: DuckDB type and bilingual comment."""

    name: str
    type: str
    comment: str


@dataclass(frozen=True)
class TableSpec:
    """One table of the sample warehouse."""

    name: str
    comment: str
    columns: tuple[ColumnSpec, ...]

    def ddl(self) -> str:
        """Return the ``CREATE TABLE`` statement (DuckDB dialect)."""
        cols = ",\n  ".join(f"{c.name} {c.type}" for c in self.columns)
        return f"CREATE TABLE {self.name} (\n  {cols}\n)"


def _c(name: str, type_: str, comment: str) -> ColumnSpec:
    return ColumnSpec(name, type_, comment)


_DS = _c("ds", "DATE", "日期分区（自然日，北京时间） / Date partition (calendar day, Beijing time)")
_GAME = _c("game_id", "INTEGER", "游戏ID，关联 dim_game.game_id / Game id, joins dim_game.game_id")
_CHANNEL = _c(
    "channel_id",
    "INTEGER",
    "渠道ID，关联 dim_channel.channel_id / Channel id, joins dim_channel.channel_id",
)
_REGION = _c(
    "region",
    "VARCHAR",
    "大区：cn_north 华北、cn_south 华南、cn_east 华东、cn_west 西部、overseas 海外 / "
    "Region: cn_north, cn_south, cn_east, cn_west, overseas",
)

TABLES: tuple[TableSpec, ...] = (
    TableSpec(
        "dim_game",
        "游戏维表，每个游戏一行 / Game dimension, one row per game",
        (
            _c("game_id", "INTEGER", "游戏ID（主键） / Game id (primary key)"),
            _c(
                "game_base_id",
                "INTEGER",
                "游戏母包ID，同一IP或项目的多个游戏共用 / Game base id shared by games of one "
                "franchise or project",
            ),
            _c("game_name", "VARCHAR", "游戏名称 / Game name"),
            _c(
                "genre",
                "VARCHAR",
                "游戏品类：SLG 策略、MMORPG 角色扮演、Shooter 射击、Casual 休闲、Card 卡牌 / "
                "Genre: SLG, MMORPG, Shooter, Casual, Card",
            ),
            _c(
                "platform",
                "VARCHAR",
                "发行平台，如 iOS/Android、iOS/Android/PC / Platforms, e.g. iOS/Android",
            ),
            _c("launch_date", "DATE", "上线（公测）日期 / Launch (open beta) date"),
            _c(
                "status",
                "VARCHAR",
                "运营状态：live 运营中、offline 已下线、testing 测试中 / "
                "Status: live, offline, testing",
            ),
        ),
    ),
    TableSpec(
        "dim_channel",
        "渠道维表，每个分发渠道一行 / Channel dimension, one row per distribution channel",
        (
            _c("channel_id", "INTEGER", "渠道ID（主键） / Channel id (primary key)"),
            _c(
                "channel_name",
                "VARCHAR",
                "渠道编码：official 官网、app_store 苹果、google_play 谷歌、huawei 华为、"
                "xiaomi 小米、oppo OPPO、vivo vivo、bilibili B站、taptap TapTap / Channel code",
            ),
            _c(
                "channel_type",
                "VARCHAR",
                "渠道类型：official 官方、store 应用商店、android_store 安卓硬核联运、"
                "community 社区 / Channel type: official, store, android_store, community",
            ),
        ),
    ),
    TableSpec(
        "dws_game_active_di",
        "游戏活跃日汇总：按日、游戏、渠道、大区统计活跃与新增用户，由 dwd_user_login_di 聚合"
        " / Daily active summary per day, game, channel and region, aggregated from "
        "dwd_user_login_di",
        (
            _DS,
            _GAME,
            _CHANNEL,
            _REGION,
            _c(
                "dau",
                "BIGINT",
                "日活跃用户数（当日登录的去重用户） / Daily active users (distinct users who "
                "logged in that day)",
            ),
            _c(
                "new_users",
                "BIGINT",
                "新增用户数（首次登录日为当日的用户） / New users (users whose first login is "
                "that day)",
            ),
        ),
    ),
    TableSpec(
        "dws_game_pay_di",
        "游戏付费日汇总：按日、游戏、渠道、大区、道具类别统计付费 / Daily payment summary per "
        "day, game, channel, region and item category",
        (
            _DS,
            _GAME,
            _CHANNEL,
            _REGION,
            _c(
                "item_category",
                "VARCHAR",
                "道具类别：皮肤、月卡、抽卡、礼包 / Item category: skin (皮肤), monthly card "
                "(月卡), gacha (抽卡), bundle (礼包)",
            ),
            _c(
                "pay_users",
                "BIGINT",
                "付费用户数（该类别内去重；跨类别相加会重复计数） / Paying users (distinct within "
                "the category; summing across categories double-counts)",
            ),
            _c("orders", "BIGINT", "订单数 / Number of orders"),
            _c(
                "revenue",
                "DECIMAL(18,2)",
                "流水（充值金额，人民币元，含税） / Revenue (gross bookings, CNY, tax included)",
            ),
        ),
    ),
    TableSpec(
        "dws_sdk_funnel_di",
        "SDK转化漏斗日汇总：按日、游戏、渠道、SDK版本、漏斗步骤统计到达用户数 / Daily SDK "
        "conversion funnel per day, game, channel, SDK version and step",
        (
            _DS,
            _GAME,
            _CHANNEL,
            _c("sdk_version", "VARCHAR", "SDK版本号，如 3.1.0、3.1.5、3.2.0 / SDK version"),
            _c(
                "step",
                "VARCHAR",
                "漏斗步骤：download 下载、install 安装、sdk_init SDK初始化、login 登录、"
                "create_role 创角、first_pay 首充 / Funnel step",
            ),
            _c("step_order", "INTEGER", "步骤序号 1-6 / Step order 1-6"),
            _c(
                "users",
                "BIGINT",
                "到达该步骤的设备用户数 / Users (devices) that reached the step",
            ),
        ),
    ),
    TableSpec(
        "dwd_user_login_di",
        "用户登录明细日表：每个用户每天每个游戏一行 / User login detail, one row per user, "
        "game and day",
        (
            _DS,
            _GAME,
            _c("uid", "BIGINT", "用户ID / User id"),
            _CHANNEL,
            _REGION,
            _c(
                "online_minutes", "INTEGER", "当日在线时长（分钟） / Online time that day (minutes)"
            ),
        ),
    ),
    TableSpec(
        "ops_events",
        "运营日历：活动、版本更新、维护、促销 / Operations calendar: events, version updates, "
        "maintenance and promotions",
        (
            _c("event_id", "INTEGER", "事件ID（主键） / Event id (primary key)"),
            _GAME,
            _c("start_ds", "DATE", "开始日期（含） / Start date (inclusive)"),
            _c("end_ds", "DATE", "结束日期（含） / End date (inclusive)"),
            _c(
                "event_type",
                "VARCHAR",
                "类型：activity 活动、version 版本更新、maintenance 停服维护、promotion 促销、"
                "marketing 市场投放 / Type: activity, version, maintenance, promotion, marketing",
            ),
            _c("title", "VARCHAR", "标题 / Title"),
            _c("description", "VARCHAR", "说明 / Description"),
        ),
    ),
    TableSpec(
        "announcements",
        "游戏公告：版本更新说明、维护通知、活动与商城公告、社区公告 / Player-facing "
        "announcements: patch notes, maintenance notices, event, store and community posts",
        (
            _c("announcement_id", "INTEGER", "公告ID（主键） / Announcement id (primary key)"),
            _GAME,
            _c("ds", "DATE", "发布日期 / Publish date"),
            _c(
                "category",
                "VARCHAR",
                "类别：notice 通知、patch 版本更新、maintenance 维护、event 活动、store 商城、"
                "marketing 推广、community 社区 / Category: notice, patch, maintenance, event, "
                "store, marketing, community",
            ),
            _c("title", "VARCHAR", "公告标题 / Title"),
            _c("content", "VARCHAR", "公告正文 / Body text"),
        ),
    ),
    TableSpec(
        "meta_table_lineage",
        "表血缘：每个（表，上游表）一行，附生成该表的ETL SQL / Table lineage, one row per "
        "(table, upstream table) with the ETL SQL that builds the table",
        (
            _c("table_name", "VARCHAR", "下游表名 / Downstream table name"),
            _c("upstream_table", "VARCHAR", "上游表名 / Upstream table name"),
            _c("etl_sql", "VARCHAR", "生成下游表的ETL SQL / ETL SQL that builds the table"),
        ),
    ),
)

TABLE_NAMES: tuple[str, ...] = tuple(t.name for t in TABLES)
