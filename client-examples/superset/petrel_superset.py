"""Apache Superset engine spec for Petrel (Arrow Flight SQL over DataFusion's SQL).

Superset picks an engine spec by the SQLAlchemy backend name; flightsql-dbapi's dialect is
`datafusion` (URI `datafusion://[user:password@]host:port[?insecure=true]`), for which Superset
6.1 ships none, so without this module Superset treats Petrel as a generic database with no
time grains (a chart with a time grain fails: "No grain spec for P1D"). Installed beside
Superset (`pip install client-examples/superset`, done by scripts/setup-superset.sh), it is
found through the `superset.db_engine_specs` entry point.

What it says about Petrel's SQL (DataFusion's, PostgreSQL-like):
- time grains are `date_trunc('<unit>', col)` (DataFusion's units: second ... year);
- datetime literals are `TIMESTAMP '...'` / `DATE '...'`;
- epoch seconds and milliseconds convert with `to_timestamp_seconds` / `to_timestamp_millis`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import types

from superset.constants import TimeGrain
from superset.db_engine_specs.base import BaseEngineSpec


class PetrelEngineSpec(BaseEngineSpec):
    """Petrel over flightsql-dbapi's `datafusion` SQLAlchemy dialect."""

    engine = "datafusion"
    engine_name = "Petrel (Arrow Flight SQL)"
    default_driver = "flightsql"
    sqlalchemy_uri_placeholder = "datafusion://user:password@host:port?insecure=true"

    allows_joins = True
    allows_subqueries = True
    allows_alias_in_select = True
    allows_alias_in_orderby = True
    allows_sql_comments = True

    _time_grain_expressions = {
        None: "{col}",
        TimeGrain.SECOND: "date_trunc('second', {col})",
        TimeGrain.MINUTE: "date_trunc('minute', {col})",
        TimeGrain.HOUR: "date_trunc('hour', {col})",
        TimeGrain.DAY: "date_trunc('day', {col})",
        TimeGrain.WEEK: "date_trunc('week', {col})",
        TimeGrain.MONTH: "date_trunc('month', {col})",
        TimeGrain.QUARTER: "date_trunc('quarter', {col})",
        TimeGrain.YEAR: "date_trunc('year', {col})",
    }

    @classmethod
    def epoch_to_dttm(cls) -> str:
        return "to_timestamp_seconds({col})"

    @classmethod
    def epoch_ms_to_dttm(cls) -> str:
        return "to_timestamp_millis({col})"

    @classmethod
    def convert_dttm(
        cls, target_type: str, dttm: datetime, db_extra: dict[str, Any] | None = None
    ) -> str | None:
        sqla_type = cls.get_sqla_column_type(target_type)
        if isinstance(sqla_type, types.Date) and not isinstance(sqla_type, types.DateTime):
            return f"DATE '{dttm.date().isoformat()}'"
        if isinstance(sqla_type, (types.DateTime, types.TIMESTAMP)):
            return f"TIMESTAMP '{dttm.isoformat(sep=' ', timespec='microseconds')}'"
        return None
