"""Nested JSON records (`Analysis.to_dict()`) as flat tables: one column per leaf, dotted names
(`counters.l2_to_smem_bytes`), through pandas.json_normalize. Lists (a kernel's grid, the
kernels of a schedule) become one JSON text cell, so every cell is a scalar and the table can
be written to CSV or Parquet."""
from __future__ import annotations

import json


def _cell(v):
    return json.dumps(v, sort_keys=True) if isinstance(v, (list, tuple)) else v


def to_frame(records: list):
    """A DataFrame with one row per record; columns in first-seen order."""
    import pandas as pd
    if not records:
        return pd.DataFrame()
    df = pd.json_normalize(records, sep=".")
    for col in df.columns:
        s = df[col]
        if s.dtype == object:
            df[col] = s.map(_cell)
        elif s.dtype.kind == "f" and s.isna().any() and (s.dropna() % 1 == 0).all():
            df[col] = s.astype("Int64")   # an integer field some records lack: keep it integer
    return df


def flat(record: dict) -> dict:
    """One record flattened the same way, as a dict."""
    return to_frame([record]).to_dict("records")[0]


def to_csv(records: list) -> str:
    return to_frame(records).to_csv(index=False, lineterminator="\n")
