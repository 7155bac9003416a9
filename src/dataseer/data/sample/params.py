"""Small parameter tables of the sample warehouse: games, channels, events, curves.

Everything big is generated in DuckDB SQL; this module only holds the facts
(games, channels, the operations calendar, lineage) and builds the small
per-(game, day) parameter frames the SQL reads. A seeded numpy generator adds
day-level noise here, so the whole warehouse depends only on ``seed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from importlib import resources

import numpy as np
import pandas as pd
import yaml

START_DATE = date(2025, 1, 1)
REGIONS: tuple[str, ...] = ("cn_north", "cn_south", "cn_east", "cn_west", "overseas")
CATEGORIES: tuple[str, ...] = ("皮肤", "月卡", "抽卡", "礼包")
STEPS: tuple[str, ...] = ("download", "install", "sdk_init", "login", "create_role", "first_pay")
STEP_CONVERSION: tuple[float, ...] = (1.0, 0.86, 0.96, 0.90, 0.82, 0.07)


@dataclass(frozen=True)
class FunnelIncident:
    """The injected SDK funnel incident (anomaly 2 in manifest.yaml)."""

    game_id: int
    channel_name: str
    sdk_version: str
    start: date
    end: date
    login_conversion: float


FUNNEL_INCIDENT = FunnelIncident(
    1002, "huawei", "3.2.0", date(2026, 10, 10), date(2026, 10, 16), 0.55
)


@dataclass(frozen=True)
class Game:
    """One game with the knobs that shape its curves."""

    game_id: int
    game_base_id: int
    name: str
    genre: str
    platform: str
    launch: date
    status: str
    last_day: date | None
    joins: float
    trend: float
    pay_rate: float
    overseas: float
    fatigue: float
    sdk_rollouts: tuple[tuple[str, date], ...]


GAMES: tuple[Game, ...] = (
    Game(1001, 100, "星海远征", "SLG", "iOS/Android", date(2025, 1, 1), "live", None,
         95.0, 0.45, 0.070, 0.12, 0.0,
         (("3.1.0", date(2025, 1, 1)), ("3.1.5", date(2025, 9, 1)), ("3.2.0", date(2026, 9, 15)))),
    Game(1002, 200, "幻境物语", "MMORPG", "iOS/Android", date(2025, 2, 20), "live", None,
         80.0, 0.0, 0.060, 0.10, 0.05,
         (("3.1.0", date(2025, 2, 20)), ("3.1.5", date(2025, 10, 15)),
          ("3.2.0", date(2026, 10, 10)))),
    Game(1003, 300, "机甲风暴", "Shooter", "iOS/Android/PC", date(2025, 4, 18), "live", None,
         90.0, -0.6, 0.050, 0.15, 0.25,
         (("3.1.0", date(2025, 4, 18)), ("3.1.5", date(2025, 11, 5)),
          ("3.2.0", date(2026, 11, 1)))),
    Game(1004, 400, "萌宠大作战", "Casual", "iOS/Android", date(2025, 7, 10), "live", None,
         70.0, 0.30, 0.030, 0.25, 0.0,
         (("3.1.0", date(2025, 7, 10)), ("3.1.5", date(2025, 10, 1)),
          ("3.2.0", date(2026, 10, 20)))),
    Game(1005, 500, "三国群英传说", "Card", "iOS/Android", date(2025, 1, 1), "offline",
         date(2026, 3, 31), 60.0, -1.0, 0.055, 0.05, 0.35,
         (("3.1.0", date(2025, 1, 1)), ("3.1.5", date(2025, 12, 1)))),
    Game(1006, 100, "代号:极光", "SLG", "iOS/Android/PC", date(2026, 10, 1), "testing", None,
         30.0, 0.0, 0.020, 0.10, 0.0,
         (("3.2.0", date(2026, 10, 1)),)),
)  # fmt: skip

# (channel_id, channel_name, channel_type, weight in China, weight overseas)
CHANNELS: tuple[tuple[int, str, str, float, float], ...] = (
    (1, "official", "official", 0.14, 0.10),
    (2, "app_store", "store", 0.22, 0.45),
    (3, "google_play", "store", 0.0, 0.45),
    (4, "huawei", "android_store", 0.14, 0.0),
    (5, "xiaomi", "android_store", 0.10, 0.0),
    (6, "oppo", "android_store", 0.08, 0.0),
    (7, "vivo", "android_store", 0.08, 0.0),
    (8, "bilibili", "community", 0.10, 0.0),
    (9, "taptap", "community", 0.14, 0.0),
)
CHANNEL_IDS = {name: cid for cid, name, *_ in CHANNELS}

# (share of payers, ARPPU in CNY, extra orders per payer)
CATEGORY_PARAMS: dict[str, tuple[float, float, float]] = {
    "皮肤": (0.25, 68.0, 0.2),
    "月卡": (0.35, 30.0, 0.0),
    "抽卡": (0.25, 128.0, 1.5),
    "礼包": (0.15, 48.0, 0.4),
}


@dataclass(frozen=True)
class Effect:
    """How an operations event moves the data on the days it covers."""

    joins: float = 1.0
    activity: float = 1.0
    pay: float = 1.0
    category_rate: dict[str, float] = field(default_factory=dict)
    category_arppu: dict[str, float] = field(default_factory=dict)


_DEFAULT_EFFECTS: dict[str, Effect] = {
    "activity": Effect(joins=1.15, activity=1.04, pay=1.10),
    "version": Effect(joins=1.25, activity=1.03, pay=1.05),
    "maintenance": Effect(),
    "promotion": Effect(category_rate={"礼包": 1.8}),
    "marketing": Effect(joins=1.6),
}


@dataclass(frozen=True)
class OpsEvent:
    """One row of the operations calendar plus its effect on the data."""

    game_id: int
    start: date
    end: date
    event_type: str
    title: str
    description: str
    effect: Effect | None = None

    def resolved_effect(self) -> Effect:
        """Return the explicit effect, or the default one for the event type."""
        return self.effect if self.effect is not None else _DEFAULT_EFFECTS[self.event_type]


def _load_events() -> tuple[OpsEvent, ...]:
    text = resources.files(__package__).joinpath("ops_events.yaml").read_text(encoding="utf-8")
    events = []
    for row in yaml.safe_load(text):
        eff = row.get("effect")
        events.append(
            OpsEvent(
                game_id=int(row["game_id"]),
                start=row["start"],
                end=row.get("end", row["start"]),
                event_type=row["type"],
                title=row["title"],
                description=row["description"],
                effect=None if eff is None else Effect(**eff),
            )
        )
    return tuple(events)


OPS_EVENTS: tuple[OpsEvent, ...] = _load_events()

_REGION_WEIGHTS_CN = (0.24, 0.28, 0.33, 0.15)


def game_by_id(game_id: int) -> Game:
    """Look up a game; raise ``KeyError`` for an unknown id."""
    for game in GAMES:
        if game.game_id == game_id:
            return game
    msg = f"unknown game_id {game_id}"
    raise KeyError(msg)


def _weekday_factors(days: pd.DatetimeIndex) -> tuple[np.ndarray, np.ndarray]:
    join = np.array([0.92, 0.90, 0.92, 0.95, 1.04, 1.18, 1.12])
    act = np.array([0.95, 0.94, 0.95, 0.97, 1.03, 1.12, 1.09])
    wd = days.dayofweek.to_numpy()
    return join[wd], act[wd]


def game_day_frame(end_date: date, seed: int) -> pd.DataFrame:
    """Per-(game, day) knobs for every day a game is open.

    Columns: ``game_id, ds, day_idx, join_mu`` (expected new users at scale 1),
    ``act_mult`` (multiplier of each user's daily login probability) and
    ``pay_mult``. ``day_idx`` counts days from 2025-01-01 so SQL can hash it.
    """
    rng = np.random.default_rng(seed)
    frames = []
    for game in GAMES:
        last = min(game.last_day or end_date, end_date)
        if last < game.launch:
            continue
        days = pd.date_range(game.launch, last, freq="D")
        idx = (days - pd.Timestamp(START_DATE)).days.to_numpy()
        since = (idx - (game.launch - START_DATE).days).astype(float)
        progress = idx / 700.0
        join_wd, act_wd = _weekday_factors(days)
        trend = np.maximum(0.15, 1 + game.trend * progress)
        launch_boost = 1.0 + 2.5 * np.exp(-since / 14.0)
        join_mu = game.joins * trend * launch_boost * join_wd
        join_mu *= np.exp(rng.normal(0.0, 0.08, len(days)))
        act = act_wd * np.exp(rng.normal(0.0, 0.02, len(days)))
        act *= 1.0 - game.fatigue * since / 700.0
        pay = np.exp(rng.normal(0.0, 0.05, len(days)))
        frame = pd.DataFrame(
            {
                "game_id": game.game_id,
                "ds": days.date,
                "day_idx": idx.astype(np.int64),
                "join_mu": join_mu,
                "act_mult": act,
                "pay_mult": pay,
            }
        )
        for event in OPS_EVENTS:
            if event.game_id != game.game_id:
                continue
            eff = event.resolved_effect()
            end = event.end if event.event_type != "version" else event.start + timedelta(days=2)
            mask = (frame["ds"] >= event.start) & (frame["ds"] <= end)
            frame.loc[mask, "join_mu"] *= eff.joins
            frame.loc[mask, "act_mult"] *= eff.activity
            frame.loc[mask, "pay_mult"] *= eff.pay
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def category_day_frame(game_days: pd.DataFrame) -> pd.DataFrame:
    """Per-(game, day, item category) payment rate and ARPPU.

    ``rate`` is the probability that an active user pays in the category that
    day; ``arppu`` the mean revenue per paying user in CNY.
    """
    rows = []
    for category, (share, arppu, extra) in CATEGORY_PARAMS.items():
        part = game_days[["game_id", "ds", "day_idx", "pay_mult"]].copy()
        part["item_category"] = category
        part["cat_idx"] = CATEGORIES.index(category)
        pay_rate = part["game_id"].map({g.game_id: g.pay_rate for g in GAMES})
        part["rate"] = pay_rate * share * part["pay_mult"]
        part["arppu"] = arppu
        part["extra_orders"] = extra
        for event in OPS_EVENTS:
            eff = event.resolved_effect()
            mask = (
                (part["game_id"] == event.game_id)
                & (part["ds"] >= event.start)
                & (part["ds"] <= event.end)
            )
            part.loc[mask, "rate"] *= eff.category_rate.get(category, 1.0)
            part.loc[mask, "arppu"] *= eff.category_arppu.get(category, 1.0)
        rows.append(part.drop(columns=["pay_mult"]))
    return pd.concat(rows, ignore_index=True)


def region_channel_frame(seed: int) -> pd.DataFrame:
    """Cumulative (region, channel) mix per game, for assigning users by a uniform draw."""
    rng = np.random.default_rng(seed + 1)
    rows = []
    for game in GAMES:
        cn = np.array(_REGION_WEIGHTS_CN) * rng.uniform(0.85, 1.15, 4)
        cn = cn / cn.sum() * (1.0 - game.overseas)
        region_w = [*cn.tolist(), game.overseas]
        chan_jitter = rng.uniform(0.8, 1.2, len(CHANNELS))
        lo = 0.0
        for r_idx, region in enumerate(REGIONS):
            col = 4 if region == "overseas" else 3
            w = np.array([c[col] for c in CHANNELS]) * chan_jitter
            w = w / w.sum() * region_w[r_idx]
            for (cid, *_), weight in zip(CHANNELS, w, strict=True):
                if weight <= 0:
                    continue
                rows.append((game.game_id, region, r_idx, cid, lo, lo + float(weight)))
                lo += float(weight)
        rows[-1] = (*rows[-1][:5], 1.0 + 1e-9)
    return pd.DataFrame(rows, columns=["game_id", "region", "region_idx", "channel_id", "lo", "hi"])


def _version_number(version: str) -> int:
    major, minor, patch = (int(part) for part in version.split("."))
    return major * 10000 + minor * 100 + patch


def funnel_base_frame(game_days: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Expected downloads per (game, day, channel, SDK version) at scale 1.

    SDK adoption: a new version jumps to 30% of traffic on its rollout day
    (forced update of active players) and climbs to 97% over three weeks;
    older versions share the rest, newest first.
    """
    rng = np.random.default_rng(seed + 2)
    chan_share: dict[int, np.ndarray] = {}
    for game in GAMES:
        w = np.array([c[3] * (1 - game.overseas) + c[4] * game.overseas for c in CHANNELS])
        w = w * rng.uniform(0.85, 1.15, len(CHANNELS))
        chan_share[game.game_id] = w / w.sum()
    rows = []
    for game in GAMES:
        gd = game_days[game_days["game_id"] == game.game_id]
        idx = gd["day_idx"].to_numpy()
        remaining = np.ones(len(gd))
        shares: list[tuple[str, np.ndarray]] = []
        for version, rollout in reversed(game.sdk_rollouts):
            since = idx - (rollout - START_DATE).days
            adopt = np.where(since < 0, 0.0, np.minimum(0.97, 0.30 + 0.67 * since / 21.0))
            if version == game.sdk_rollouts[0][0]:
                adopt = np.ones(len(gd))
            shares.append((version, remaining * adopt))
            remaining = remaining * (1.0 - adopt)
        downloads = gd["join_mu"].to_numpy() * 80.0
        for version, share in shares:
            for c_idx, (cid, *_) in enumerate(CHANNELS):
                mu = downloads * share * chan_share[game.game_id][c_idx]
                keep = mu >= 1.0
                if not keep.any():
                    continue
                rows.append(
                    pd.DataFrame(
                        {
                            "game_id": game.game_id,
                            "ds": gd["ds"].to_numpy()[keep],
                            "day_idx": idx[keep],
                            "channel_id": cid,
                            "sdk_version": version,
                            "version_idx": _version_number(version),
                            "dl_mu": mu[keep],
                        }
                    )
                )
    return pd.concat(rows, ignore_index=True)


def dim_game_frame() -> pd.DataFrame:
    """Rows of ``dim_game``."""
    return pd.DataFrame(
        [
            (g.game_id, g.game_base_id, g.name, g.genre, g.platform, g.launch, g.status)
            for g in GAMES
        ],
        columns=["game_id", "game_base_id", "game_name", "genre", "platform", "launch_date",
                 "status"],
    )  # fmt: skip


def dim_channel_frame() -> pd.DataFrame:
    """Rows of ``dim_channel``."""
    return pd.DataFrame(
        [(cid, name, kind) for cid, name, kind, *_ in CHANNELS],
        columns=["channel_id", "channel_name", "channel_type"],
    )


def ops_events_frame(end_date: date) -> pd.DataFrame:
    """Rows of ``ops_events`` that start on or before ``end_date``."""
    rows = [
        (e.game_id, e.start, min(e.end, end_date), e.event_type, e.title, e.description)
        for e in sorted(OPS_EVENTS, key=lambda e: (e.start, e.game_id))
        if e.start <= end_date
    ]
    frame = pd.DataFrame(
        rows, columns=["game_id", "start_ds", "end_ds", "event_type", "title", "description"]
    )
    frame.insert(0, "event_id", range(1, len(frame) + 1))
    return frame
