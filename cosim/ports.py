"""The controller's ports as the co-simulation sees them: packed integers in the bit layouts
of :mod:`hbfsim.rtl.layouts`.

STYLE "Bit layouts are defined once": :class:`StructCodec` reads every field's offset and
width from the Amaranth layout itself, so nothing here knows a bit position. It exists
because ``data.Const(layout, v).field`` costs 30-50 us per access, more than a whole
co-simulated cycle; tests/cosim/test_cosim_ports.py checks it against ``layout.const(...)``
and ``data.Const`` views field by field.

:class:`Port` reads and writes one top-level signal. Under Verilator, cocotb's runner sets
``COCOTB_TRUST_INERTIAL_WRITES=1``: cocotb then writes at once, and so does :class:`Port`,
through the GPI handle below cocotb's value objects (0.1 us instead of 2-5 us per access).
Elsewhere (Icarus) it goes through the public ``handle.value``.
"""

from __future__ import annotations

__all__ = ["Codecs", "ControllerPorts", "Port", "StructCodec", "channel_shape", "host_ports",
           "media_ports", "port_names", "req_names"]

import enum
import os

from amaranth.hdl import Shape
from amaranth.lib import data

from hbfsim.config import HbfConfig
from hbfsim.rtl.layouts import (Widths, cmd_layout, cpl_layout, req_layout, resp_layout,
                                system_req_layout)


class StructCodec:
    """Pack and unpack integers of one ``data.Layout`` by the layout's own field offsets.

    Parameters
    ----------
    layout : data.Layout
        A struct layout; nested struct fields are flattened to dotted names (``tag.kind``).

    Members
    -------
    fields : dict[str, tuple[int, int]]
        Dotted field name -> (offset, width).
    size : int
        Width of the packed value.
    """

    def __init__(self, layout: data.Layout):
        self.layout = layout
        self.size = Shape.cast(layout).width
        self.fields: dict[str, tuple[int, int]] = {}
        self._enums: dict[str, type] = {}
        self._walk(layout, "", 0)

    def _walk(self, layout, prefix: str, base: int) -> None:
        for name, field in layout:
            path = prefix + name
            if isinstance(field.shape, data.Layout):
                self._walk(field.shape, path + ".", base + field.offset)
            else:
                self.fields[path] = (base + field.offset, field.width)
                if isinstance(field.shape, type) and issubclass(field.shape, enum.Enum):
                    self._enums[path] = field.shape

    def mask(self, name: str) -> int:
        """The bits of field ``name`` in a packed value (e.g. to test ``valid`` quickly)."""
        off, width = self.fields[name]
        return ((1 << width) - 1) << off

    def pack(self, values: dict) -> int:
        """Pack ``{dotted name: int or enum member}``; missing fields are 0.

        Raises
        ------
        ValueError
            An unknown field, or a value that does not fit its field (named).
        """
        out = 0
        for name, v in values.items():
            if name not in self.fields:
                raise ValueError(f"{name!r} is not a field of {self.layout!r}")
            if isinstance(v, enum.Enum):
                v = v.value
            off, width = self.fields[name]
            if not 0 <= v < 1 << width:
                raise ValueError(f"field {name} = {v} does not fit in {width} bits")
            out |= v << off
        return out

    def unpack(self, value: int) -> dict[str, int]:
        """Every field of ``value`` as an integer (enums as their ``.value``)."""
        return {name: (value >> off) & ((1 << width) - 1)
                for name, (off, width) in self.fields.items()}

    def getter(self, *names: str):
        """A fast ``f(value) -> tuple`` of the named fields, in the order given."""
        spec = [(self.fields[n][0], (1 << self.fields[n][1]) - 1) for n in names]

        def get(value: int) -> tuple:
            return tuple((value >> off) & m for off, m in spec)

        return get


def media_ports(cfg: HbfConfig) -> int:
    """Media command/completion port pairs: ``stacks x channels``, numbered
    ``stack * channels + channel`` (rtl/system.py; one stack: the channels)."""
    return cfg.stacks * cfg.channels


def channel_shape(cfg: HbfConfig) -> bool:
    """The channel shape (timing-contract.md §1, §2)."""
    return cfg.host_ports == "channel"


def host_ports(cfg: HbfConfig) -> int:
    """Request (and response) ports of the top level: ``stacks x channels`` in the channel
    shape (timing-contract.md §1, §2: port ``stack * C + channel``), else 1
    (the channel shape of one stack with one channel is the stack shape,
    :attr:`hbfsim.rtl.controller.Controller.ports`)."""
    if channel_shape(cfg):
        return cfg.stacks * cfg.channels
    return 1


def req_names(cfg: HbfConfig) -> list[tuple[str, str]]:
    """Per request port, the name prefixes of its ``req`` and ``resp`` signals:
    ``("req", "resp")`` with one port, ``("req__p", "resp__p")`` with several."""
    P = host_ports(cfg)
    if P == 1:
        return [("req", "resp")]
    return [(f"req__{p}", f"resp__{p}") for p in range(P)]


def port_names(cfg: HbfConfig) -> list[str]:
    """The top-level ports of ``emit_verilog(cfg)`` (docs/rtl.md ``emit_verilog``); with
    several stacks in the stack shape also the system layer's observability outputs ``rr``,
    ``offers`` and ``routed``; in the channel shape ``req__<p>__valid`` ... per port."""
    names = ["clk", "rst"]
    for rq, rs in req_names(cfg):
        names += [f"{rq}__valid", f"{rq}__ready", f"{rq}__payload", f"{rs}__valid",
                  f"{rs}__ready", f"{rs}__payload"]
    names += ["drain", "m_valid", "flushes"]
    if cfg.stacks > 1 and not channel_shape(cfg):   # the channel shape's system is wiring
        names += ["rr", "offers", "routed"]   # routed: the route stage's hand-over (§2)
    for c in range(media_ports(cfg)):
        names += [f"cmd__{c}", f"cpl__{c}"]
    return names


class Codecs:
    """The payload codecs of the top level built for ``cfg``: one stack's
    :class:`~hbfsim.rtl.controller.Controller`, or the :class:`~hbfsim.rtl.system.System`
    of several (its stack controllers' widths, and a request address relative to
    ``base_address`` over every page, contract §2).

    Members
    -------
    widths : Widths
    req, resp, cmd, cpl : StructCodec
    system : bool
        Several stacks in the stack shape: ``req.addr`` is the system address, not the
        stack-local one, and the system layer routes it (in the channel shape each system
        port is its stack's port, with stack-local addresses: §2).
    """

    def __init__(self, cfg: HbfConfig, *, id_bits: int = 32, source_bits: int = 8):
        from hbfsim.rtl.system import stack_config

        w = Widths.of(stack_config(cfg), id_bits=id_bits, source_bits=source_bits)
        self.widths = w
        self.system = cfg.stacks > 1 and not channel_shape(cfg)
        self.req = StructCodec(system_req_layout(w, cfg.pages) if self.system
                               else req_layout(w))
        self.resp = StructCodec(resp_layout(w))
        self.cmd = StructCodec(cmd_layout(w))
        self.cpl = StructCodec(cpl_layout(w))

    @staticmethod
    def flush_counts(value: int) -> list[int]:
        """The ``flushes`` port's counters (full, raw, pressure, deadline, drain)."""
        from hbfsim.rtl.write_buffer import flushes_layout

        layout = flushes_layout()
        w = Shape.cast(layout.elem_shape).width
        return [(value >> (w * k)) & ((1 << w) - 1) for k in range(layout.length)]


class Port:
    """One top-level signal read and written as an unsigned integer.

    Parameters
    ----------
    handle : cocotb handle
        The signal.
    """

    __slots__ = ("handle", "name", "width", "last", "_raw", "_wide", "_mask")

    def __init__(self, handle):
        self.handle = handle
        self.name = handle._name
        self.width = len(handle)
        self.last: int | None = None
        trusted = os.environ.get("COCOTB_TRUST_INERTIAL_WRITES") == "1"
        self._raw = getattr(handle, "_handle", None) if trusted else None
        self._wide = self.width > 32
        self._mask = (1 << self.width) - 1

    def read(self) -> int:
        """The current value. Raises ValueError on X or Z (four-state simulators)."""
        raw = self._raw
        if raw is None:
            return int(self.handle.value)
        if self._wide:
            return int(raw.get_signal_val_binstr(), 2)
        return raw.get_signal_val_long() & self._mask

    def write(self, value: int) -> None:
        """Drive ``value`` (skipped when it is what this port last drove)."""
        if value == self.last:
            return
        self.last = value
        raw = self._raw
        if raw is None:
            self.handle.value = value
        elif self._wide:
            raw.set_signal_val_binstr(0, format(value, f"0{self.width}b"))
        else:
            raw.set_signal_val_int(0, value)


class ControllerPorts(Codecs):
    """Every port of ``hbf_controller`` with the codecs of its payloads (:class:`Codecs`).

    Parameters
    ----------
    dut : cocotb handle
        The top-level ``hbf_controller``.
    cfg : HbfConfig
        Its configuration (channel count and widths).
    id_bits, source_bits : int
        As given to :func:`hbfsim.rtl.emit.emit_verilog`.

    Raises
    ------
    ValueError
        A port's width disagrees with its layout (the build does not match ``cfg``).
    """

    def __init__(self, dut, cfg: HbfConfig, *, id_bits: int = 32, source_bits: int = 8):
        super().__init__(cfg, id_bits=id_bits, source_bits=source_bits)
        g = lambda n: Port(getattr(dut, n))  # noqa: E731
        self.clk = dut.clk
        self.rst = g("rst")
        # per port (§1): (valid, ready, payload) of req[p] and of resp[p]
        self.reqs, self.resps = [], []
        for rq, rs in req_names(cfg):
            self.reqs.append((g(f"{rq}__valid"), g(f"{rq}__ready"), g(f"{rq}__payload")))
            self.resps.append((g(f"{rs}__valid"), g(f"{rs}__ready"), g(f"{rs}__payload")))
        self.req_valid, self.req_ready, self.req_payload = self.reqs[0]
        self.resp_valid, self.resp_ready, self.resp_payload = self.resps[0]
        self.drain, self.m_valid = g("drain"), g("m_valid")
        self.flushes = g("flushes")
        self.routed = g("routed") if self.system else None
        self.cmds = [g(f"cmd__{c}") for c in range(media_ports(cfg))]
        self.cpls = [g(f"cpl__{c}") for c in range(media_ports(cfg))]
        for port, codec in ([(r[2], self.req) for r in self.reqs]
                            + [(r[2], self.resp) for r in self.resps]
                            + [(p, self.cmd) for p in self.cmds]
                            + [(p, self.cpl) for p in self.cpls]):
            if port.width != codec.size:
                raise ValueError(f"port {port.name} is {port.width} bits but its layout is "
                                 f"{codec.size}: the build does not match the configuration")
