"""The metric SQL compiler: metric catalog entries → readable, exact DuckDB SQL.

The offline analyst and the lookup line answer metric questions with SQL
that a person can read and re-run, so the compiler writes plain SQL: explicit
column lists, literal ``game_id IN (...)`` filters and
``ds BETWEEN DATE '…' AND DATE '…'`` ranges. The output is DuckDB SQL that
also runs on PostgreSQL (``1.0 * a / NULLIF(b, 0)`` keeps divisions in
numeric on both); other dialects go through sqlglot.

How each metric kind is computed (definitions live in ``metrics.yaml``):

* additive — ``SUM(column)`` of the metric's table;
* ratio — numerator and denominator are additive metrics, each summed on its
  own table (filtered by the dimensions that table has) and joined on the
  split keys, the denominator side leading; the ratio of sums, never a mean of
  ratios;
* retention — first-login cohorts from ``dwd_user_login_di``: users whose
  first login ever falls in the period, split by the channel and region of
  that first day, share of them logging in again exactly ``offset_days``
  later; cohort days whose return day is past the last loaded day are left
  out, since they cannot have returned yet;
* funnel — users per SDK funnel step and conversion from the previous step
  (``LAG`` over ``step_order``).

Ratios are rounded to 4 decimals and money to 2 (``decimals`` in the pack),
only in the final projection, so deltas are computed from exact values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Literal, Protocol

from dataseer.knowledge.pack import Game, KnowledgePack, Metric
from dataseer.knowledge.understand import Filter

Grain = Literal["total", "day", "week", "month"]
_GRAINS = ("total", "day", "week", "month")
_INDENT = "  "


class _PeriodLike(Protocol):
    @property
    def start(self) -> date: ...

    @property
    def end(self) -> date: ...


@dataclass(frozen=True)
class _Key:
    """One split key: its name inside CTEs and the expression computing it."""

    dimension: str
    name: str
    expr: str
    label_table: str | None = None
    label_column: str | None = None

    def on(self, alias: str) -> str:
        return self.expr.format(a=f"{alias}." if alias else "")


@dataclass(frozen=True)
class _Frame:
    """CTEs whose last one (``name``) holds keys, component sums and ``value``.

    ``num``/``den`` name the component columns of ratio-like metrics (None for
    additive ones); ``inner`` are keys a contribution is partitioned by (the
    funnel step).
    """

    ctes: tuple[tuple[str, str], ...]
    name: str
    keys: tuple[_Key, ...]
    num: str | None
    den: str | None
    inner: tuple[_Key, ...] = ()


def _lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _date(d: date) -> str:
    return f"DATE '{d.isoformat()}'"


def _game_ids(games: Sequence[Game | int]) -> list[int]:
    ids: list[int] = []
    for g in games:
        gid = g.id if isinstance(g, Game) else g
        if isinstance(gid, bool) or not isinstance(gid, int):
            msg = f"games must be Game records or integer ids, got {g!r}"
            raise TypeError(msg)
        if gid not in ids:
            ids.append(gid)
    return ids


def _check_period(period: _PeriodLike, what: str = "period") -> None:
    if period.start > period.end:
        msg = f"{what} starts after it ends: {period.start} > {period.end}"
        raise ValueError(msg)


def _indent(text: str, level: int = 1) -> str:
    pad = _INDENT * level
    return "\n".join(pad + line if line else line for line in text.splitlines())


def _with(ctes: Sequence[tuple[str, str]], body: str) -> str:
    if not ctes:
        return body
    parts = [f"{name} AS (\n{_indent(sql)}\n)" for name, sql in ctes]
    return "WITH " + ",\n".join(parts) + "\n" + body


def _select(
    columns: Sequence[str],
    source: str,
    *,
    joins: Sequence[str] = (),
    where: Sequence[str] = (),
    group_by: Sequence[str] = (),
    order_by: Sequence[str] = (),
) -> str:
    lines = ["SELECT", ",\n".join(_INDENT + c for c in columns), f"FROM {source}"]
    lines += list(joins)
    if where:
        lines.append("WHERE " + f"\n{_INDENT}AND ".join(where))
    if group_by:
        lines.append("GROUP BY " + ", ".join(group_by))
    if order_by:
        lines.append("ORDER BY " + ", ".join(order_by))
    return "\n".join(lines)


class _Compiler:
    """Shared state of one compilation: the pack, games, filters."""

    def __init__(
        self,
        pack: KnowledgePack,
        games: Sequence[Game | int],
        filters: Sequence[Filter],
    ) -> None:
        self.pack = pack
        self.game_ids = _game_ids(games)
        self.filters = tuple(filters)
        for f in self.filters:
            dim = pack.dimension(f.dimension)
            if not f.values:
                msg = f"filter on {f.dimension!r} has no values"
                raise ValueError(msg)
            if f.column not in (dim.column, dim.label_column):
                msg = (
                    f"filter on {f.dimension!r} uses column {f.column!r}; use {dim.filter_column!r}"
                )
                raise ValueError(msg)

    # --- keys and conditions ---------------------------------------------

    def keys(self, metric: Metric, dimensions: Sequence[str], grain: Grain) -> tuple[_Key, ...]:
        dims = list(dict.fromkeys(dimensions))
        time_dims = [d for d in dims if self.pack.dimension(d).grain]
        if len(time_dims) > 1 or (time_dims and grain not in ("total", time_dims[0])):
            msg = f"more than one time grain requested: {[*time_dims, grain]}"
            raise ValueError(msg)
        if grain not in _GRAINS:
            msg = f"grain must be one of {', '.join(_GRAINS)}, got {grain!r}"
            raise ValueError(msg)
        if time_dims:
            grain = self.pack.dimension(time_dims[0]).grain or "total"  # type: ignore[assignment]
        allowed = set(metric.dimensions)
        keys: list[_Key] = []
        time = metric.time_column
        if grain == "day":
            keys.append(_Key("day", time, "{a}" + time))
        elif grain in ("week", "month"):
            keys.append(_Key(grain, grain, f"CAST(DATE_TRUNC('{grain}', {{a}}{time}) AS DATE)"))
        for d in dims:
            dim = self.pack.dimension(d)
            if dim.grain:
                continue
            if d not in allowed:
                msg = (
                    f"metric {metric.key!r} cannot be split by {d!r}; "
                    f"allowed: {', '.join(metric.dimensions)}"
                )
                raise ValueError(msg)
            if metric.kind == "funnel" and d == "step":
                continue
            keys.append(_Key(d, dim.column, "{a}" + dim.column, dim.lookup_table, dim.label_column))
        return tuple(keys)

    def table_dimensions(self, table: str, fallback: Sequence[str]) -> set[str]:
        doc = self.pack.table_doc(table)
        return set(doc.dimensions) if doc is not None else set(fallback)

    def conditions(
        self,
        table: str,
        fallback_dims: Sequence[str],
        alias: str,
        period: _PeriodLike | None,
        time_column: str = "ds",
        *,
        skip: Sequence[str] = (),
    ) -> list[str]:
        a = f"{alias}." if alias else ""
        where: list[str] = []
        if self.game_ids:
            where.append(f"{a}game_id IN ({', '.join(str(g) for g in self.game_ids)})")
        if period is not None:
            where.append(f"{a}{time_column} BETWEEN {_date(period.start)} AND {_date(period.end)}")
        dims = self.table_dimensions(table, fallback_dims)
        for f in self.filters:
            if f.dimension not in dims or f.dimension in skip:
                continue
            dim = self.pack.dimension(f.dimension)
            values = ", ".join(_lit(v) for v in f.values)
            if dim.lookup_table and f.column == dim.label_column:
                where.append(
                    f"{a}{dim.column} IN (SELECT {dim.column} FROM {dim.lookup_table} "
                    f"WHERE {dim.label_column} IN ({values}))"
                )
            else:
                where.append(f"{a}{dim.column} IN ({values})")
        return where

    def check_filters(self, metric: Metric) -> None:
        tables = [metric.table]
        if metric.kind == "ratio":
            parts = (metric.numerator, metric.denominator)
            tables = [self.pack.metric(p).table for p in parts if p]
        usable: set[str] = set()
        for t in tables:
            usable |= self.table_dimensions(t, metric.dimensions)
        if metric.kind == "retention":
            usable = set(metric.dimensions)
        for f in self.filters:
            if f.dimension not in usable:
                msg = f"metric {metric.key!r} cannot be filtered by {f.dimension!r}"
                raise ValueError(msg)

    # --- frames -------------------------------------------------------------

    def component(
        self, metrics: Sequence[Metric], keys: Sequence[_Key], period: _PeriodLike
    ) -> str:
        table = metrics[0].table
        cols = [f"{k.on('')} AS {k.name}" if k.on("") != k.name else k.name for k in keys]
        cols += [f"SUM({m.column}) AS {m.key}" for m in metrics]
        where = self.conditions(table, metrics[0].dimensions, "", period, metrics[0].time_column)
        return _select(cols, table, where=where, group_by=[k.on("") for k in keys])

    def frame(
        self, metric: Metric, keys: tuple[_Key, ...], period: _PeriodLike, prefix: str
    ) -> _Frame:
        self.check_filters(metric)
        if metric.kind == "additive":
            ctes = ((prefix, self.component([metric], keys, period)),)
            return _Frame(ctes, prefix, keys, None, None)
        if metric.kind == "ratio":
            return self._ratio_frame(metric, keys, period, prefix)
        if metric.kind == "retention":
            return self._retention_frame(metric, keys, period, prefix)
        return self._funnel_frame(metric, keys, period, prefix)

    def _ratio_frame(
        self, metric: Metric, keys: tuple[_Key, ...], period: _PeriodLike, prefix: str
    ) -> _Frame:
        assert metric.numerator and metric.denominator
        num = self.pack.metric(metric.numerator)
        den = self.pack.metric(metric.denominator)
        value = f"1.0 * {{n}}{num.key} / NULLIF({{d}}{den.key}, 0) AS {metric.key}"
        names = [k.name for k in keys]
        if num.table == den.table:
            base = f"{prefix}_base"
            ctes = [(base, self.component([num, den], keys, period))]
            body = _select([*names, num.key, den.key, value.format(n="", d="")], base)
        else:
            n_cte, d_cte = f"{prefix}_{num.key}", f"{prefix}_{den.key}"
            ctes = [
                (n_cte, self.component([num], keys, period)),
                (d_cte, self.component([den], keys, period)),
            ]
            on = " AND ".join(f"n.{k} = d.{k}" for k in names)
            join = f"LEFT JOIN {n_cte} AS n ON {on}" if names else f"CROSS JOIN {n_cte} AS n"
            numerator = f"COALESCE(n.{num.key}, 0)"
            body = _select(
                [
                    *[f"d.{k}" for k in names],
                    f"{numerator} AS {num.key}",
                    f"d.{den.key}",
                    f"1.0 * {numerator} / NULLIF(d.{den.key}, 0) AS {metric.key}",
                ],
                f"{d_cte} AS d",
                joins=[join],
            )
        ctes.append((prefix, body))
        return _Frame(tuple(ctes), prefix, keys, num.key, den.key)

    def _retention_frame(
        self, metric: Metric, keys: tuple[_Key, ...], period: _PeriodLike, prefix: str
    ) -> _Frame:
        offset = metric.offset_days or 1
        table = metric.table
        first, cohort = f"{prefix}_first", f"{prefix}_cohort"
        first_where = []
        if self.game_ids:
            first_where.append(f"game_id IN ({', '.join(str(g) for g in self.game_ids)})")
        first_where.append(f"ds <= {_date(period.end)}")
        first_sql = _select(
            ["game_id", "uid", "MIN(ds) AS first_ds"],
            table,
            where=first_where,
            group_by=["game_id", "uid"],
        )
        # The last loaded day is read for the same games only: an unfiltered
        # MAX(ds) would reveal other games' data to a user scoped to a few.
        last_day = f"SELECT MAX(ds) FROM {table}"
        if self.game_ids:
            last_day += f" WHERE game_id IN ({', '.join(str(g) for g in self.game_ids)})"
        cohort_where = [
            f"f.first_ds BETWEEN {_date(period.start)} AND {_date(period.end)}",
            f"f.first_ds + {offset} <= ({last_day})",
            *self.conditions(table, metric.dimensions, "l", None),
        ]
        cohort_sql = _select(
            ["l.ds", "l.game_id", "l.uid", "l.channel_id", "l.region"],
            f"{table} AS l",
            joins=[
                f"JOIN {first} AS f\n{_INDENT}ON f.game_id = l.game_id "
                "AND f.uid = l.uid AND f.first_ds = l.ds"
            ],
            where=cohort_where,
        )
        key_cols = [f"{k.on('c')} AS {k.name}" for k in keys]
        body = _select(
            [
                *key_cols,
                "COUNT(*) AS cohort_users",
                "COUNT(r.uid) AS retained_users",
                f"1.0 * COUNT(r.uid) / NULLIF(COUNT(*), 0) AS {metric.key}",
            ],
            f"{cohort} AS c",
            joins=[
                f"LEFT JOIN {table} AS r\n{_INDENT}ON r.game_id = c.game_id "
                f"AND r.uid = c.uid AND r.ds = c.ds + {offset}"
            ],
            group_by=[k.on("c") for k in keys],
        )
        ctes = ((first, first_sql), (cohort, cohort_sql), (prefix, body))
        return _Frame(ctes, prefix, keys, "retained_users", "cohort_users")

    def _funnel_frame(
        self, metric: Metric, keys: tuple[_Key, ...], period: _PeriodLike, prefix: str
    ) -> _Frame:
        table = metric.table
        steps = f"{prefix}_steps"
        cols = [f"{k.on('')} AS {k.name}" if k.on("") != k.name else k.name for k in keys]
        where = self.conditions(table, metric.dimensions, "", period, skip=("step",))
        steps_sql = _select(
            [*cols, "step_order", "step", "SUM(users) AS users"],
            table,
            where=where,
            group_by=[*[k.on("") for k in keys], "step_order", "step"],
        )
        names = [k.name for k in keys]
        partition = f"PARTITION BY {', '.join(names)} " if names else ""
        window = f"OVER ({partition}ORDER BY step_order)"
        body = _select(
            [
                *names,
                "step_order",
                "step",
                "users",
                f"LAG(users) {window} AS prior_step_users",
                f"FIRST_VALUE(users) {window} AS first_users",
                f"1.0 * users / NULLIF(LAG(users) {window}, 0) AS {metric.key}",
            ],
            steps,
        )
        inner = (_Key("step", "step_order", "{a}step_order"), _Key("step", "step", "{a}step"))
        return _Frame(
            ((steps, steps_sql), (prefix, body)), prefix, keys, "users", "prior_step_users", inner
        )

    def step_filter(self, alias: str) -> list[str]:
        return [
            f"{alias}.step IN ({', '.join(_lit(v) for v in f.values)})"
            for f in self.filters
            if f.dimension == "step"
        ]


def _alias(aliases: dict[str, str], table: str) -> str:
    """A short alias for a dimension table: ``dim_game`` → ``g``, ``dim_channel`` → ``c``."""
    if table not in aliases:
        base = table.removeprefix("dim_")[:1] or "t"
        alias = base
        while alias in aliases.values() or alias in ("f", "j", "m", "s"):
            alias += base
        aliases[table] = alias
    return aliases[table]


def _labels(
    keys: Sequence[_Key], alias_of: dict[str, str], source: str
) -> tuple[list[str], list[str]]:
    """Output columns for keys (labels joined from dimension tables) and the joins."""
    columns: list[str] = []
    joins: list[str] = []
    for k in keys:
        ref = source.format(k=k.name)
        if k.label_table and k.label_column:
            alias = _alias(alias_of, k.label_table)
            if k.name == "game_id":
                columns.append(f"{ref} AS game_id")
            columns.append(f"{alias}.{k.label_column}")
            joins.append(f"LEFT JOIN {k.label_table} AS {alias} ON {alias}.{k.name} = {ref}")
        else:
            columns.append(ref if ref.endswith(f".{k.name}") else f"{ref} AS {k.name}")
    return columns, joins


def _time_order(keys: Sequence[_Key], source: str) -> list[str]:
    return [source.format(k=k.name) for k in keys if k.dimension in ("day", "week", "month")]


def _round(expr: str, decimals: int) -> str:
    return f"ROUND({expr}, {decimals})"


def _pack(pack: KnowledgePack | None) -> KnowledgePack:
    return pack if pack is not None else KnowledgePack.load()


def _resolve(metric: Metric | str, pack: KnowledgePack) -> Metric:
    return pack.metric(metric) if isinstance(metric, str) else metric


def compile_metric_sql(
    metric: Metric | str,
    *,
    games: Sequence[Game | int],
    period: _PeriodLike,
    dimensions: Sequence[str] = (),
    grain: Grain = "total",
    filters: Sequence[Filter] = (),
    pack: KnowledgePack | None = None,
) -> str:
    """Return SQL computing ``metric`` for ``games`` over ``period``, split by ``dimensions``.

    ``games`` empty means all games. ``grain`` adds a time key (``ds``,
    ``week`` or ``month``; a time dimension in ``dimensions`` does the same).
    Ratio-like metrics also return their component sums, so an answer can
    show what the ratio is made of.

    Raises:
        ValueError: a dimension or filter the metric does not support, or a
            malformed period or grain.
    """
    pack = _pack(pack)
    m = _resolve(metric, pack)
    _check_period(period)
    comp = _Compiler(pack, games, filters)
    keys = comp.keys(m, dimensions, grain)
    if m.kind == "additive":
        return _flat_additive(comp, m, keys, period)
    frame = comp.frame(m, keys, period, "m")
    source = "m.{k}"
    columns, joins = _labels(frame.keys, {}, source)
    inner = [k.name for k in frame.inner]
    columns += [f"m.{c}" for c in inner]
    if m.kind == "funnel":
        columns += ["m.users", "m.prior_step_users"]
    else:
        columns += [f"m.{frame.num}", f"m.{frame.den}"]
    columns.append(f"{_round('m.' + m.key, m.decimals)} AS {m.key}")
    order = _time_order(frame.keys, source)
    if m.kind == "funnel":
        order += [source.format(k=k.name) for k in frame.keys if k not in order] + ["m.step_order"]
    elif frame.keys:
        order += [f"{m.key} DESC"]
    body = _select(columns, "m", joins=joins, where=comp.step_filter("m"), order_by=order)
    return _with(frame.ctes, body)


def _flat_additive(comp: _Compiler, m: Metric, keys: Sequence[_Key], period: _PeriodLike) -> str:
    """A single SELECT for additive metrics: the most common and most readable case."""
    assert m.column
    comp.check_filters(m)
    columns: list[str] = []
    joins: list[str] = []
    group_by: list[str] = []
    aliases: dict[str, str] = {}
    for k in keys:
        expr = k.on("f")
        group_by.append(expr)
        if k.label_table and k.label_column:
            alias = _alias(aliases, k.label_table)
            joins.append(f"LEFT JOIN {k.label_table} AS {alias} ON {alias}.{k.name} = {expr}")
            if k.name == "game_id":
                columns.append(expr)
            columns.append(f"{alias}.{k.label_column}")
            group_by.append(f"{alias}.{k.label_column}")
        else:
            columns.append(expr if expr == f"f.{k.name}" else f"{expr} AS {k.name}")
    total = f"SUM(f.{m.column})"
    columns.append(f"{_round(total, m.decimals) if m.decimals else total} AS {m.key}")
    order = [k.on("f") for k in keys if k.dimension in ("day", "week", "month")]
    if len(keys) > len(order):
        order.append(f"{m.key} DESC")
    where = comp.conditions(m.table, m.dimensions, "f", period, m.time_column)
    return _select(
        columns,
        f"{m.table} AS f",
        joins=joins,
        where=where,
        group_by=group_by,
        order_by=order,
    )


def _two_frames(
    comp: _Compiler,
    m: Metric,
    keys: tuple[_Key, ...],
    period: _PeriodLike,
    compare_to: _PeriodLike,
) -> tuple[_Frame, _Frame, list[tuple[str, str]], str, list[str]]:
    """Current and previous frames, plus a ``joined`` CTE aligning them on the keys."""
    cur = comp.frame(m, keys, period, "cur")
    prev = comp.frame(m, keys, compare_to, "prev")
    names = [k.name for k in (*keys, *cur.inner)]
    zero = m.kind == "additive"

    def side(col: str, alias: str) -> str:
        return f"COALESCE({alias}.{col}, 0)" if zero else f"{alias}.{col}"

    cols = [f"COALESCE(cur.{k}, prev.{k}) AS {k}" for k in names]
    cols += [f"{side(m.key, 'cur')} AS current_value", f"{side(m.key, 'prev')} AS previous_value"]
    parts: list[str] = []
    if cur.num and cur.den:
        for alias, label in (("cur", "current"), ("prev", "previous")):
            parts += [f"{label}_{cur.num}", f"{label}_{cur.den}"]
            cols += [
                f"COALESCE({alias}.{cur.num}, 0) AS {label}_{cur.num}",
                f"COALESCE({alias}.{cur.den}, 0) AS {label}_{cur.den}",
            ]
    if names:
        on = " AND ".join(f"cur.{k} = prev.{k}" for k in names)
        body = _select(cols, "cur", joins=[f"FULL OUTER JOIN prev ON {on}"])
    else:
        body = _select(cols, "cur", joins=["CROSS JOIN prev"])
    ctes = [*cur.ctes, *prev.ctes, ("joined", body)]
    return cur, prev, ctes, "joined", parts


def compile_comparison_sql(
    metric: Metric | str,
    *,
    games: Sequence[Game | int],
    period: _PeriodLike,
    compare_to: _PeriodLike,
    dimensions: Sequence[str] = (),
    filters: Sequence[Filter] = (),
    pack: KnowledgePack | None = None,
) -> str:
    """Return SQL comparing ``metric`` over ``period`` against ``compare_to``.

    Columns: the split keys, ``current_value``, ``previous_value``, ``delta``
    (current − previous) and ``pct_change`` (delta / previous, 4 decimals).
    Time splits are refused: the two periods have different days.

    Raises:
        ValueError: a time dimension, or one the metric does not support.
    """
    pack = _pack(pack)
    m = _resolve(metric, pack)
    _check_period(period)
    _check_period(compare_to, "compare_to")
    if any(pack.dimension(d).grain for d in dimensions):
        msg = "a comparison cannot be split by a time dimension; compare totals per period"
        raise ValueError(msg)
    comp = _Compiler(pack, games, filters)
    keys = comp.keys(m, dimensions, "total")
    cur, _, ctes, joined, _ = _two_frames(comp, m, keys, period, compare_to)
    columns, joins = _labels(keys, {}, "j.{k}")
    columns += [f"j.{k.name}" for k in cur.inner]
    d = m.decimals
    columns += [
        f"{_round('j.current_value', d)} AS current_value",
        f"{_round('j.previous_value', d)} AS previous_value",
        f"{_round('j.current_value - j.previous_value', d)} AS delta",
        f"{_round('1.0 * (j.current_value - j.previous_value) / NULLIF(j.previous_value, 0)', 4)}"
        " AS pct_change",
    ]
    order = [f"j.{k.name}" for k in cur.inner] or (
        ["ABS(j.current_value - j.previous_value) DESC"] if keys else []
    )
    body = _select(
        columns, f"{joined} AS j", joins=joins, where=comp.step_filter("j"), order_by=order
    )
    return _with(ctes, body)


def compile_contribution_sql(
    metric: Metric | str,
    *,
    games: Sequence[Game | int],
    period: _PeriodLike,
    compare_to: _PeriodLike,
    dimension: str,
    filters: Sequence[Filter] = (),
    pack: KnowledgePack | None = None,
) -> str:
    """Return SQL splitting the change of ``metric`` between two periods by ``dimension``.

    Per value of the dimension: ``current_value``, ``previous_value``,
    ``delta`` and ``share_of_delta``. For additive metrics the share is the
    value's delta over the total delta, ranked by ``ABS(delta)``. For
    ratio-like metrics (ratio, retention, funnel) the component sums of both
    periods are returned too, and ``contribution`` is the value's exact part of
    the change of the overall ratio (``num_i/DEN_cur − num_prev_i/DEN_prev``;
    these sum to the overall delta); rows are ranked by ``ABS(contribution)``
    and ``share_of_delta`` is contribution over the overall delta. Funnel rows
    are computed per step.

    Raises:
        ValueError: a time dimension, or one the metric does not support.
    """
    pack = _pack(pack)
    m = _resolve(metric, pack)
    _check_period(period)
    _check_period(compare_to, "compare_to")
    if pack.dimension(dimension).grain:
        msg = "contribution needs a non-time dimension (channel, region, ...)"
        raise ValueError(msg)
    comp = _Compiler(pack, games, filters)
    keys = comp.keys(m, [dimension], "total")
    cur, _, ctes, joined, parts = _two_frames(comp, m, keys, period, compare_to)
    names = [k.name for k in keys]
    inner = [k.name for k in cur.inner]
    over = f"OVER (PARTITION BY {', '.join(inner)})" if inner else "OVER ()"
    delta = "current_value - previous_value"
    scored = [*names, *inner, "current_value", "previous_value", *parts]
    if cur.num and cur.den:
        contribution = (
            f"1.0 * current_{cur.num} / NULLIF(SUM(current_{cur.den}) {over}, 0)\n"
            f"{_INDENT}- 1.0 * previous_{cur.num} / NULLIF(SUM(previous_{cur.den}) {over}, 0)"
        )
        ranking = "contribution"
        scored.append(f"{contribution} AS contribution")
        ctes.append(("scored", _select(scored, joined)))
        share = "1.0 * s.contribution / NULLIF(SUM(s.contribution) OVER"
    else:
        ranking = "delta"
        scored.append(f"{delta} AS delta")
        ctes.append(("scored", _select(scored, joined)))
        share = "1.0 * s.delta / NULLIF(SUM(s.delta) OVER"
    share += f" ({'PARTITION BY ' + ', '.join('s.' + i for i in inner) if inner else ''}), 0)"
    columns, joins = _labels(keys, {}, "s.{k}")
    columns += [f"s.{i}" for i in inner]
    d = m.decimals
    columns += [
        f"{_round('s.current_value', d)} AS current_value",
        f"{_round('s.previous_value', d)} AS previous_value",
        f"{_round('s.current_value - s.previous_value', d)} AS delta",
    ]
    if cur.num and cur.den:
        columns += [f"s.{p}" for p in parts]
        columns.append(f"{_round('s.contribution', 4)} AS contribution")
    columns.append(f"{_round(share, 4)} AS share_of_delta")
    order = [f"s.{i}" for i in inner] + [f"ABS(s.{ranking}) DESC"]
    order += [f"s.{n}" for n in names]
    body = _select(columns, "scored AS s", joins=joins, where=comp.step_filter("s"), order_by=order)
    return _with(ctes, body)


def compile_funnel_sql(
    *,
    games: Sequence[Game | int],
    period: _PeriodLike,
    dimensions: Sequence[str] = (),
    filters: Sequence[Filter] = (),
    pack: KnowledgePack | None = None,
) -> str:
    """Return SQL of the SDK funnel: per step, users, step and overall conversion.

    ``step_conversion`` is users over the previous step's users (NULL on the
    first step), ``overall_conversion`` users over the first step's. A filter
    on ``step`` selects rows after the conversions are computed, so
    "login" still shows its conversion from ``sdk_init``.
    """
    pack = _pack(pack)
    m = next((x for x in pack.metrics if x.kind == "funnel"), None)
    if m is None:
        msg = "the knowledge pack has no funnel metric"
        raise ValueError(msg)
    _check_period(period)
    comp = _Compiler(pack, games, filters)
    keys = comp.keys(m, dimensions, "total")
    frame = comp.frame(m, keys, period, "funnel")
    columns, joins = _labels(frame.keys, {}, "f.{k}")
    columns += [
        "f.step_order",
        "f.step",
        "f.users",
        f"{_round('f.' + m.key, 4)} AS step_conversion",
        f"{_round('1.0 * f.users / NULLIF(f.first_users, 0)', 4)} AS overall_conversion",
    ]
    order = [*_time_order(frame.keys, "f.{k}")]
    order += [f"f.{k.name}" for k in frame.keys if f"f.{k.name}" not in order]
    order.append("f.step_order")
    body = _select(
        columns, f"{frame.name} AS f", joins=joins, where=comp.step_filter("f"), order_by=order
    )
    return _with(frame.ctes, body)


def compile_ops_events_sql(*, games: Sequence[Game | int], period: _PeriodLike) -> str:
    """Return SQL listing operations events that overlap ``period`` (any day in common)."""
    _check_period(period)
    ids = _game_ids(games)
    where = []
    if ids:
        where.append(f"e.game_id IN ({', '.join(str(g) for g in ids)})")
    where += [f"e.start_ds <= {_date(period.end)}", f"e.end_ds >= {_date(period.start)}"]
    return _select(
        [
            "e.event_id",
            "e.game_id",
            "g.game_name",
            "e.start_ds",
            "e.end_ds",
            "e.event_type",
            "e.title",
            "e.description",
        ],
        "ops_events AS e",
        joins=["LEFT JOIN dim_game AS g ON g.game_id = e.game_id"],
        where=where,
        order_by=["e.start_ds", "e.event_id"],
    )
