"""Widths, enums and payload layouts shared by the controller blocks.

Bit layouts are defined here once (STYLE "Bit layouts are defined once"); the cocotb side packs
and unpacks through the same layouts. Field sets follow docs/history.md §1.
"""

from __future__ import annotations

__all__ = [
    "CmdOp",
    "FLUSH_CAUSES",
    "FlushCause",
    "WbState",
    "EntryKind",
    "ReqOp",
    "Widths",
    "cmd_layout",
    "cpl_layout",
    "done_layout",
    "event_layout",
    "lane_done_layout",
    "lane_layout",
    "queue_op_layout",
    "req_layout",
    "resp_layout",
    "ret_layout",
    "system_req_layout",
    "tag_layout",
    "target_layout",
]

from dataclasses import dataclass

from amaranth.hdl import unsigned
from amaranth.lib import data, enum
from amaranth.utils import bits_for, ceil_log2

from hbfsim.config import PAGE_BYTES, HbfConfig


class ReqOp(enum.Enum, shape=1):
    """Operation of a host request (contract §1 ``req.op``)."""

    READ = 0
    WRITE = 1


class CmdOp(enum.Enum, shape=1):
    """Operation of a media command (contract §1 ``cmd.op``)."""

    READ = 0
    PROGRAM = 1


class EntryKind(enum.Enum, shape=1):
    """Which table a command tag indexes: the read MSHR or the write buffer."""

    MSHR = 0
    WBUF = 1


def _index_bits(n: int) -> int:
    # Never zero wide: a one-entry table still gets a 1-bit index, which Verilog accepts.
    return max(1, ceil_log2(n))


@dataclass(frozen=True)
class Widths:
    """Field widths of one stack controller, derived from an :class:`HbfConfig`.

    Members
    -------
    page : int
        Stack-local (and channel-local) page number.
    addr : int
        Stack-local byte address: page and 12 offset bits.
    channel, subarray : int
        Channel number in a stack and subarray number in a channel.
    slot : int
        Admission slot (request slot) number.
    mshr_index, wb_index, tag_index : int
        MSHR entry, write-buffer entry, and the index field of a command tag (the wider one).
    bytes : int
        Request size 1..4096.
    id, source : int
        Request id and source (return routing only, sources.md A5).
    planes : int
        Multi-plane commands (docs/timing-contract.md §7a MP2): ``megaplane_planes``
        when ``multiplane`` is not ``off``, else 0 (``cmd`` and ``cpl`` keep their single-plane
        fields, and nothing below is used).
    megaplane, row : int
        Under multi-plane commands: a megaplane of a channel and a channel-local row (a
        page's channel-local index div ``subarrays_per_channel``, MP2).
    """

    page: int
    addr: int
    channel: int
    subarray: int
    slot: int
    mshr_index: int
    wb_index: int
    tag_index: int
    bytes: int
    id: int
    source: int
    planes: int = 0
    megaplane: int = 1
    row: int = 1

    @classmethod
    def of(cls, cfg: HbfConfig, *, id_bits: int = 32, source_bits: int = 8) -> "Widths":
        """Compute the widths of ``cfg``'s stack controller."""
        page = _index_bits(cfg.pages_per_stack)
        mshr_index = _index_bits(cfg.mshr_entries)
        wb_index = _index_bits(cfg.write_buffer_entries)
        multi = getattr(cfg, "multiplane", "off") != "off"
        planes = cfg.megaplane_planes if multi else 0
        subs = cfg.subarrays_per_channel
        return cls(
            page=page,
            addr=page + ceil_log2(PAGE_BYTES),
            channel=_index_bits(cfg.channels),
            subarray=_index_bits(cfg.subarrays_per_channel),
            slot=_index_bits(cfg.admission),
            mshr_index=mshr_index,
            wb_index=wb_index,
            tag_index=max(mshr_index, wb_index),
            bytes=bits_for(PAGE_BYTES),
            id=id_bits,
            source=source_bits,
            planes=planes,
            megaplane=_index_bits(subs // planes) if multi else 1,
            row=_index_bits(-(-cfg.pages_per_stack // subs)) if multi else 1,
        )


def target_layout(w: Widths) -> data.StructLayout:
    """Where a page lives in the stack (contract §3)."""
    return data.StructLayout({
        "channel": unsigned(w.channel),
        "local": unsigned(w.page),
        "subarray": unsigned(w.subarray),
    })


def tag_layout(w: Widths) -> data.StructLayout:
    """Command tag: entry kind and index (contract §1 ``cmd.tag``)."""
    return data.StructLayout({"kind": EntryKind, "index": unsigned(w.tag_index)})


def queue_op_layout(w: Widths) -> data.StructLayout:
    """A page operation waiting in a channel queue (contract §6); ``op`` follows ``tag.kind``."""
    return data.StructLayout({
        "tag": tag_layout(w),
        "subarray": unsigned(w.subarray),
        "page": unsigned(w.page),
    })


def event_layout(index_bits: int) -> data.StructLayout:
    """A valid-only notification naming one table entry (command issued for it)."""
    return data.StructLayout({"valid": 1, "index": unsigned(index_bits)})


def done_layout(index_bits: int) -> data.StructLayout:
    """A valid-only completion notification for one table entry, with its flags."""
    return data.StructLayout({
        "valid": 1,
        "index": unsigned(index_bits),
        "buffer_hit": 1,
        "error": 1,
    })


def ret_layout(w: Widths, index_bits: int) -> data.StructLayout:
    """The head waiter of a table entry in RETURN (contract §8)."""
    return data.StructLayout({
        "index": unsigned(index_bits),
        "slot": unsigned(w.slot),
        "channel": unsigned(w.channel),
        "last": 1,
        "buffer_hit": 1,
        "error": 1,
    })


def req_layout(w: Widths) -> data.StructLayout:
    """Host request (contract §1 ``req``)."""
    return data.StructLayout({
        "id": unsigned(w.id),
        "op": ReqOp,
        "addr": unsigned(w.addr),
        "bytes": unsigned(w.bytes),
        "source": unsigned(w.source),
    })


def system_req_layout(w: Widths, pages: int) -> data.StructLayout:
    """Host request at the system port (contract §2): as :func:`req_layout`, but ``addr`` is
    the byte address relative to ``base_address`` over all ``pages`` logical pages."""
    return data.StructLayout({
        "id": unsigned(w.id),
        "op": ReqOp,
        "addr": unsigned(_index_bits(pages) + ceil_log2(PAGE_BYTES)),
        "bytes": unsigned(w.bytes),
        "source": unsigned(w.source),
    })


def resp_layout(w: Widths) -> data.StructLayout:
    """Host response (contract §1 ``resp``)."""
    return data.StructLayout({
        "id": unsigned(w.id),
        "op": ReqOp,
        "source": unsigned(w.source),
        "mshr_hit": 1,
        "buffer_hit": 1,
        "cache_hit": 1,
        "error": 1,
    })


def cmd_layout(w: Widths) -> data.StructLayout:
    """Media command, valid only (contract §1 ``cmd[c]``).

    Under multi-plane commands (``w.planes > 0``, docs/timing-contract.md §7a MP2):
    ``op``, ``megaplane``, the ``planes`` mask of the megaplane's subarrays it uses and the
    ``row`` every used plane reads or programs; no tag (the controller keeps the tags)."""
    if w.planes:
        return data.StructLayout({
            "valid": 1,
            "op": CmdOp,
            "megaplane": unsigned(w.megaplane),
            "planes": unsigned(w.planes),
            "row": unsigned(w.row),
        })
    return data.StructLayout({
        "valid": 1,
        "op": CmdOp,
        "subarray": unsigned(w.subarray),
        "page": unsigned(w.page),
        "tag": tag_layout(w),
    })


def cpl_layout(w: Widths) -> data.StructLayout:
    """Media completion, valid only (contract §1 ``cpl[c]``).

    Under multi-plane commands (MP7): one per command, with its ``megaplane``, ``planes``
    mask and per-plane ``buffer_hit`` and ``error`` masks (bit ``p``: plane ``p`` of the
    megaplane)."""
    if w.planes:
        return data.StructLayout({
            "valid": 1,
            "megaplane": unsigned(w.megaplane),
            "planes": unsigned(w.planes),
            "buffer_hit": unsigned(w.planes),
            "error": unsigned(w.planes),
        })
    return data.StructLayout({
        "valid": 1,
        "subarray": unsigned(w.subarray),
        "tag": tag_layout(w),
        "buffer_hit": 1,
        "error": 1,
    })



def lane_layout(w: Widths) -> data.StructLayout:
    """One operation of a multi-plane issue decision (MP2, MP3): lane ``p`` is plane ``p``
    of the command's megaplane, valid when the command uses it; its entry's tag."""
    return data.StructLayout({"valid": 1, "tag": tag_layout(w)})


def lane_done_layout(w: Widths) -> data.StructLayout:
    """One operation of a multi-plane completion (MP7): lane ``p`` completes the entry its
    command's group register held for plane ``p``, with that plane's flags."""
    return data.StructLayout({"valid": 1, "tag": tag_layout(w), "buffer_hit": 1, "error": 1})


# ---- the write buffer's entry state and flush causes (rtl/write_buffer.py re-exports them)
class WbState(enum.Enum, shape=3):
    """State of one write-buffer entry (contract §4.4)."""

    FREE = 0
    OPEN = 1
    FLUSH = 2
    QUEUED = 3
    PROGRAM = 4
    RETURN = 5


class FlushCause(enum.Enum, shape=3):
    """Why an entry left OPEN (contract §5), in priority order; NONE while OPEN."""

    NONE = 0
    FULL = 1
    RAW = 2
    PRESSURE = 3
    DEADLINE = 4
    DRAIN = 5


#: The flush causes in priority order, as counted by ``WriteBuffer.flushes``.
FLUSH_CAUSES = (FlushCause.FULL, FlushCause.RAW, FlushCause.PRESSURE, FlushCause.DEADLINE,
                FlushCause.DRAIN)
