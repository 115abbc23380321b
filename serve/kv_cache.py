"""Paged KV cache over four tiers (HBM, HBF, host DRAM, host SSD) with prefix reuse.

Capacity is counted exactly in *pages* of ``page_tokens`` tokens (vLLM-style paged KV;
16 tokens by default). A sequence's own KV occupies whole pages on a device tier (HBM or
HBF). A *block* is ``block_tokens`` tokens of a finished prefix, identified by the
workload's block hash (serve/workload.py) and occupying ``ceil(block_tokens /
page_tokens)`` pages of one tier; running sequences *pin* the blocks they reuse. Idle blocks
cool in LRU order HBM -> HBF -> DRAM -> SSD -> dropped (the serving paper's Figure 3); a
host block that is hit is reloaded to the device, HBM first (Figure 3: "host reload returns
to HBM").

Placement of new pages (own KV and reloads): HBM if it has room, else HBM after cooling its
idle blocks, else HBF (after cooling HBF's idle blocks to the host). A block released by a
sequence enters its tier's LRU tail-first, so that a prefix's tail cools before its head and
residency stays prefix-closed. Every byte written into a tier is counted (``written``, in
tokens), and the transfers the moves need (``pending``) are handed to the engine, which queues
them on its transfer channels.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["HBM", "HBF", "DRAM", "SSD", "TIER_NAMES", "CHANNELS", "Block", "KVCache"]

HBM, HBF, DRAM, SSD = 0, 1, 2, 3
TIER_NAMES = ("hbm", "hbf", "dram", "ssd")
#: Transfer channels of the moves (each direction of PCIe is its own channel; full duplex).
CHANNELS = ("hbf_write", "hbf_read", "link_in", "link_out", "ssd")


class Block:
    """One cached prefix block: its hash, tier, how many running sequences pin it, and the
    open session that keeps it for its next turn (``owner``; see :meth:`KVCache.protect`)."""

    __slots__ = ("h", "tier", "ref", "owner")

    def __init__(self, h, tier):
        self.h, self.tier, self.ref, self.owner = h, tier, 0, None


class KVCache:
    """Page accounting and the prefix-block store of one replica.

    Parameters
    ----------
    caps : sequence of 4 int
        Pages available for KV in HBM, HBF, DRAM, SSD (0 = tier absent).
    page_tokens, block_tokens : int
        ``block_tokens`` must be a multiple of ``page_tokens``.

    Members
    -------
    used : list of int
        Pages occupied per tier (own pages + blocks).
    dev_busy : int
        Device pages (HBM + HBF) held by running sequences: own pages and pinned blocks.
        Device pages in use that are not busy are idle blocks, always evictable.
    written : list of int
        Tokens of KV written into each tier (compute writes are added by the engine).
    moved_out : list of int
        Tokens of KV read out of each tier by cooling or reload.
    pending : dict
        Tokens moved since the last :meth:`take_pending`, per channel: ``hbf_write``,
        ``hbf_read``, ``link_in`` (host -> device over PCIe), ``link_out`` (device -> host),
        ``ssd`` (reads and writes of the drive).
    protected_dev : int
        Device pages of the contexts that sessions between two turns keep for their next
        turn (:meth:`protect`), kept exact as blocks move.
    """

    def __init__(self, caps, page_tokens: int = 16, block_tokens: int = 16):
        if len(caps) != 4 or any(int(c) != c or c < 0 for c in caps):
            raise ValueError(f"caps must be 4 non-negative page counts, not {caps!r}")
        if page_tokens < 1 or block_tokens < 1 or block_tokens % page_tokens:
            raise ValueError(f"block_tokens ({block_tokens}) must be a positive multiple of "
                             f"page_tokens ({page_tokens})")
        self.cap = [int(c) for c in caps]
        self.P, self.B = page_tokens, block_tokens
        self.bp = block_tokens // page_tokens
        self.used = [0, 0, 0, 0]
        self.dev_busy = 0
        self.blocks: dict = {}
        self.lru = [OrderedDict() for _ in range(4)]
        self.written = [0, 0, 0, 0]
        self.moved_out = [0, 0, 0, 0]
        self.dropped_blocks = 0
        self.pending = dict.fromkeys(CHANNELS, 0)
        self.owner_dev: dict = {}
        self.owner_blocks: dict = {}
        self.protected_dev = 0

    # ------------------------------------------------------------------ queries
    @property
    def dev_cap(self) -> int:
        return self.cap[HBM] + self.cap[HBF]

    def resident_tier(self, h):
        """Tier of the block with hash ``h`` or None."""
        b = self.blocks.get(h)
        return None if b is None else b.tier

    def on_device(self, h) -> bool:
        b = self.blocks.get(h)
        return b is not None and b.tier <= HBF

    def lookup(self, hashes, max_blocks: int) -> list:
        """The longest run of cached blocks at the head of ``hashes`` (at most ``max_blocks``)."""
        out = []
        get = self.blocks.get
        for h in hashes[:max_blocks]:
            b = get(h)
            if b is None:
                break
            out.append(b)
        return out

    def take_pending(self) -> dict:
        """The transfers accumulated since the last call (and reset them)."""
        p = self.pending
        self.pending = dict.fromkeys(CHANNELS, 0)
        return p

    # ------------------------------------------------------------------ movement
    def _next_tier(self, t):
        for d in range(t + 1, 4):
            if self.cap[d] >= self.bp:
                return d
        return None

    def _move(self, b, dest):
        """Move idle or pinned block ``b`` to ``dest`` (room already made) and count it."""
        src, n, bt = b.tier, self.bp, self.B
        self.used[src] -= n
        self.moved_out[src] += bt
        if b.owner is not None and (dest is None or dest > HBF):
            # Part of a kept context left the device: the session will reload it anyway, so
            # it keeps nothing (what it still has on the device is no longer protected).
            self.unprotect(b.owner)
        if dest is None:
            del self.blocks[b.h]
            self.dropped_blocks += 1
            return
        self.used[dest] += n
        self.written[dest] += bt
        pend = self.pending
        if dest == HBF:
            pend["hbf_write"] += bt
        if src == HBF:
            pend["hbf_read"] += bt
        if src <= HBF < dest:
            pend["link_out"] += bt
        elif dest <= HBF < src:
            pend["link_in"] += bt
        if src == SSD or dest == SSD:
            pend["ssd"] += bt
        b.tier = dest

    def _demote_one(self, t) -> bool:
        """Cool the least recently used idle block of tier ``t`` one level down."""
        lru = self.lru[t]
        if not lru:
            return False
        h, b = lru.popitem(last=False)
        dest = self._next_tier(t)
        while dest is not None and not self._make_room(dest, self.bp):
            dest = self._next_tier(dest)  # the next tier is full of busy pages: skip it
        self._move(b, dest)
        if dest is not None:
            self.lru[dest][h] = b
        return True

    def _make_room(self, t, n) -> bool:
        """Cool idle blocks of tier ``t`` until it has ``n`` free pages; False if it cannot."""
        cap, used = self.cap, self.used
        while cap[t] - used[t] < n:
            if not self._demote_one(t):
                return False
        return True

    # ------------------------------------------------------------------ allocation
    def alloc(self, n: int):
        """Allocate ``n`` busy device pages for a sequence's own KV: ``(in_hbm, in_hbf)``.

        The caller has checked ``dev_busy + n <= dev_cap``; this cannot fail then."""
        if n <= 0:
            return 0, 0
        if self.dev_busy + n > self.dev_cap:
            raise RuntimeError(f"KV allocation of {n} pages exceeds device capacity")
        cap, used = self.cap, self.used
        free_h = cap[HBM] - used[HBM]
        if free_h < n:
            while free_h < n and self._demote_one(HBM):
                free_h = cap[HBM] - used[HBM]
        nh = min(n, free_h)
        nf = n - nh
        if nf and not self._make_room(HBF, nf):
            raise RuntimeError("KV allocation: HBF full of busy pages")  # excluded above
        used[HBM] += nh
        used[HBF] += nf
        self.dev_busy += n
        return nh, nf

    def free(self, nh: int, nf: int) -> None:
        """Free busy own pages."""
        self.used[HBM] -= nh
        self.used[HBF] -= nf
        self.dev_busy -= nh + nf

    def pin(self, b: Block) -> None:
        """Mark ``b`` in use by one more running sequence (not evictable while pinned)."""
        if b.ref == 0:
            del self.lru[b.tier][b.h]
            if b.tier <= HBF:
                self.dev_busy += self.bp
        b.ref += 1

    def reload(self, b: Block) -> int:
        """Bring pinned host block ``b`` to the device (HBM first); return its new tier."""
        n = self.bp
        if self.dev_busy + n > self.dev_cap:
            raise RuntimeError("reload exceeds device capacity")
        self.dev_busy += n  # busy before making room, so room-making cannot count on it
        if self._make_room(HBM, n):
            dest = HBM
        else:
            self._make_room(HBF, n)
            dest = HBF
        self._move(b, dest)
        return dest

    def register(self, h, tier):
        """Turn ``bp`` busy own pages of ``tier`` into pinned block ``h``; None if ``h`` is
        already cached (the caller then frees the pages)."""
        if h in self.blocks:
            return None
        b = Block(h, tier)
        b.ref = 1
        self.blocks[h] = b
        return b

    def release(self, blocks) -> None:
        """Unpin ``blocks`` (in prefix order); idle ones enter their LRU tail first."""
        bp = self.bp
        for b in reversed(blocks):
            b.ref -= 1
            if b.ref == 0:
                self.lru[b.tier][b.h] = b
                if b.tier <= HBF:
                    self.dev_busy -= bp

    def protect(self, owner, blocks) -> None:
        """Mark ``blocks`` as the context open session ``owner`` keeps for its next turn and
        count their pages in ``protected_dev``, if they are all on the device (a context
        partly on the host is reloaded anyway and keeps nothing). A block another open
        session already keeps, such as a shared system prompt, stays that session's. The
        protection ends with :meth:`unprotect` or when one of the blocks leaves the device."""
        self.unprotect(owner)
        if any(b.tier > HBF for b in blocks):
            return
        mine, pages = [], 0
        for b in blocks:
            if b.owner is None:
                b.owner = owner
                mine.append(b)
                pages += self.bp
        self.owner_blocks[owner] = mine
        self.owner_dev[owner] = pages
        self.protected_dev += pages

    def unprotect(self, owner) -> None:
        """``owner``'s next turn was admitted (its blocks are pinned) or it closed."""
        for b in self.owner_blocks.pop(owner, ()):
            b.owner = None
        self.protected_dev -= self.owner_dev.pop(owner, 0)

    def check(self) -> None:
        """Assert the accounting invariants (tests call this after every step)."""
        for t in range(4):
            assert 0 <= self.used[t] <= self.cap[t], (TIER_NAMES[t], self.used[t], self.cap[t])
        blk = [0, 0, 0, 0]
        pinned_dev = 0
        for b in self.blocks.values():
            blk[b.tier] += self.bp
            if b.ref:
                assert b.tier <= HBF, "a pinned block is on the host"
                pinned_dev += self.bp
            else:
                assert b.h in self.lru[b.tier]
        for t in (DRAM, SSD):
            assert blk[t] == self.used[t], (TIER_NAMES[t], blk[t], self.used[t])
        own = self.used[HBM] + self.used[HBF] - blk[HBM] - blk[HBF]
        assert own >= 0
        assert self.dev_busy == own + pinned_dev, (self.dev_busy, own, pinned_dev)
        prot = dict.fromkeys(self.owner_dev, 0)
        for b in self.blocks.values():
            if b.owner is not None:
                assert b.tier <= HBF, "a kept context is partly on the host"
                prot[b.owner] += self.bp
        assert prot == self.owner_dev, "protected pages drifted"
        assert self.protected_dev == sum(prot.values())
        assert self.dev_busy <= self.dev_cap
