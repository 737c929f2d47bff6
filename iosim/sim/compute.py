"""Execution units of one SM: tensor cores, special-function units (exp) and fp32 ALUs.

Each unit is a FIFO server (memory.Server) shared by every CTA resident on the SM: two CTAs
on one SM each get the SM's tensor-core rate only when the other is not using it. One CTA is
assumed able to drive all of its SM's units (4 warps cover the 4 SM sub-partitions).
"""
from __future__ import annotations

from ..machine import SmRates
from .memory import Server


class SmUnits:
    """The three unit servers of one SM."""

    __slots__ = ("tensor", "exp", "alu")

    def __init__(self, rates: SmRates):
        self.tensor = Server(rates.tensor_flops_per_s)
        self.exp = Server(rates.exp_per_s)
        self.alu = Server(rates.alu_ops_per_s)
