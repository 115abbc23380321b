"""Co-simulation waveforms: the GTKWave save file, a cycle window, and reading a run back.

``cosim run --waves`` leaves three files in ``waves/``: ``NAME.vcd`` (Verilator's dump of the
ports and the top module's nets, ``--trace-depth 1``), ``NAME.gtkw`` (:func:`write_gtkw`:
the contract's interfaces, grouped, with payload fields) and ``NAME.json`` (the scenario,
and the time of cycle 0, so that the VCD can be read in cycles).

:class:`WaveFile` reads the ports back with vcdvcd and rebuilds the events at the four
interfaces through the payload layouts (:class:`hbfsim.cosim.ports.StructCodec`): the value
of a port *in cycle t* is its value at ``cycle0 + 4t + 3`` ns, the instant the testbench
drives and samples (docs/cosim.md "How it works").
"""

from __future__ import annotations

__all__ = ["WaveFile", "cut_vcd", "write_gtkw"]

import bisect
import json
import re
from pathlib import Path

from hbfsim.config import PAGE_BYTES
from hbfsim.cosim.ports import Codecs, media_ports
from hbfsim.cosim.scenario import Scenario

_RANGE = re.compile(r"\s*\[\d+(:\d+)?\]$")


def _header_vars(path: Path) -> list[tuple[str, str, int]]:
    """``(scope path, name with range, width)`` of every ``$var`` in a VCD header."""
    scope: list[str] = []
    out = []
    with open(path, errors="replace") as fh:
        for line in fh:
            tok = line.split()
            if not tok:
                continue
            if tok[0] == "$scope":
                scope.append(tok[2])
            elif tok[0] == "$upscope":
                scope.pop()
            elif tok[0] == "$var":
                # $var wire 16 AQ cmd__0 [15:0] $end
                name = tok[4] + (tok[5] if len(tok) > 6 and tok[5].startswith("[") else "")
                out.append((".".join(scope), name, int(tok[2])))
            elif tok[0] == "$enddefinitions":
                break
    return out


def write_gtkw(vcd_path: Path, gtkw: Path, channels: int,
               multiplane: bool = False) -> None:
    """Write a GTKWave save file that shows the contract's interfaces first (§1).

    Groups ``req``, ``resp``, ``cmd[c]``, ``cpl[c]`` (``channels``: media port pairs, every
    stack's) with their payload fields (the nets
    Amaranth names ``req__payload.id`` and so on), then ``drain``, ``m_valid``, ``clk``.
    With ``multiplane`` the media ports carry the fields of docs/timing-contract.md §7a
    MP2 and MP7 (megaplane, planes mask, row; completion masks).
    """
    from vcd.gtkw import GTKWSave

    have = {}
    for scope, name, _ in _header_vars(vcd_path):
        if scope.endswith("hbf_controller"):
            have.setdefault(_RANGE.sub("", name), f"{scope}.{name.replace(' ', '')}")
    groups = [("req", ["req__valid", "req__ready", "req__payload.id", "req__payload.op",
                       "req__payload.addr", "req__payload.bytes", "req__payload.source"]),
              ("resp", ["resp__valid", "resp__ready", "resp__payload.id", "resp__payload.op",
                        "resp__payload.mshr_hit", "resp__payload.buffer_hit",
                        "resp__payload.error"])]
    cmd_f = (("valid", "op", "megaplane", "planes", "row") if multiplane else
             ("valid", "op", "subarray", "page", "tag.kind", "tag.index"))
    cpl_f = (("valid", "megaplane", "planes", "buffer_hit", "error") if multiplane else
             ("valid", "subarray", "tag.kind", "tag.index", "buffer_hit", "error"))
    for c in range(channels):
        groups.append((f"cmd[{c}]", [f"cmd__{c}.{f}" for f in cmd_f]))
        groups.append((f"cpl[{c}]", [f"cpl__{c}.{f}" for f in cpl_f]))
    with open(gtkw, "w") as fh:
        save = GTKWSave(fh)
        save.comment("hbfsim co-simulation: the controller's four interfaces (contract §1)")
        save.dumpfile(str(vcd_path))
        save.savefile(str(gtkw))
        save.treeopen("hbf_controller")
        for title, names in groups:
            shown = [have[n] for n in names if n in have]
            if not shown:
                port = names[0].split(".")[0]
                shown = [have[port]] if port in have else []
            if not shown:
                continue
            with save.group(title, closed=title.startswith(("cmd[", "cpl[")) and
                            channels > 2):
                for full in shown:
                    save.trace(full, datafmt="dec" if "." in full.rsplit("]", 1)[0]
                               else "hex")
        for n in ("drain", "m_valid", "rst", "clk"):
            if n in have:
                save.trace(have[n])


def cut_vcd(src: Path, dst: Path, start: int, end: int) -> None:
    """Copy the part of ``src`` in simulation times ``[start, end]`` to ``dst``.

    Every signal's value at ``start`` is written as the initial ``$dumpvars`` block, so the
    cut file reads as a complete VCD of the window.
    """
    values: dict[str, str] = {}
    with open(src, errors="replace") as fi, open(dst, "w") as fo:
        for line in fi:
            fo.write(line)
            if line.startswith("$enddefinitions"):
                break
        started = False
        now = 0
        for line in fi:
            if line.startswith("#"):
                now = int(line[1:])
                if now > end:
                    break
                if now >= start and not started:
                    started = True
                    fo.write(f"#{now}\n$dumpvars\n")
                    fo.writelines(f"{v}\n" for v in values.values())
                    fo.write("$end\n")
                    continue
                if started:
                    fo.write(line)
                continue
            s = line.strip()
            if not s or s.startswith("$"):
                continue
            key = s.split()[-1] if s[0] in "bBrR" else s[1:]
            if started:
                fo.write(line)
            else:
                values[key] = s


class WaveFile:
    """A co-simulation VCD with its sidecar, read back in cycles.

    Parameters
    ----------
    path : str or Path
        ``waves/NAME.vcd`` written by ``cosim run --waves`` (``NAME.json`` beside it).

    Raises
    ------
    ValueError
        Unreadable file, no sidecar, or a VCD without the controller's ports.
    """

    def __init__(self, path):
        from vcdvcd import VCDVCD

        self.path = Path(path)
        side = self.path.with_suffix(".json")
        if not self.path.is_file():
            raise ValueError(f"cannot read VCD {str(self.path)!r}")
        if not side.is_file():
            raise ValueError(f"{self.path}: no {side.name} beside it; read back only VCDs "
                             "written by 'hbfsim cosim run --waves'")
        try:
            meta = json.loads(side.read_text())
            self.scenario = Scenario.from_dict(meta["scenario"])
            self.cycle0 = int(meta["cycle0_ns"])
            self.period = int(meta["period_ns"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{side}: not a co-simulation sidecar ({e})") from None
        self.meta = meta
        # the requests as presented: a GPU program's are known only after the run (the
        # testbench records them with their grant ticks; runner._keep_waves stores them)
        self.requests = meta.get("ingress") or self.scenario.requests
        self.cfg = self.scenario.cfg()
        codecs = Codecs(self.cfg)
        self.req, self.resp, self.cmd, self.cpl = (codecs.req, codecs.resp, codecs.cmd,
                                                   codecs.cpl)
        self.media_ports = media_ports(self.cfg)
        ports = ["req__valid", "req__ready", "req__payload", "resp__valid", "resp__ready",
                 "resp__payload", "drain", "m_valid"]
        for c in range(self.media_ports):
            ports += [f"cmd__{c}", f"cpl__{c}"]
        refs: dict[str, str] = {}
        for scope, name, _ in _header_vars(self.path):
            short = _RANGE.sub("", name)
            if short in ports and (short not in refs or scope == "$rootio"):
                refs[short] = f"{scope}.{name.replace(' ', '')}"
        missing = [p for p in ports if p not in refs]
        if missing:
            raise ValueError(f"{self.path}: not a co-simulation VCD of this scenario "
                             f"(no port {missing[0]})")
        vcd = VCDVCD(str(self.path), signals=list(refs.values()), store_tvs=True)
        self._tv: dict[str, tuple[list[int], list[int]]] = {}
        for short, ref in refs.items():
            tv = vcd[ref].tv
            times = [t for t, _ in tv]
            vals = [int(v, 2) if set(v) <= {"0", "1"} else 0 for _, v in tv]
            self._tv[short] = (times, vals)
        self.end_time = vcd.endtime
        window = meta.get("window")
        if window:
            self.first_cycle, self.last_cycle = window
        else:
            self.first_cycle = 0
            self.last_cycle = (self.end_time - self.cycle0 - 3) // self.period

    # ---- sampling ------------------------------------------------------------------------
    def time_of(self, t: int) -> int:
        """Simulation time (ns) of the rising edge that starts cycle ``t``."""
        return self.cycle0 + self.period * t

    def value(self, port: str, t: int) -> int:
        """Value of ``port`` in cycle ``t``."""
        times, vals = self._tv[port]
        i = bisect.bisect_right(times, self.cycle0 + self.period * t + 3) - 1
        return vals[i] if i >= 0 else 0

    def _cycles_where(self, port: str, test) -> list[int]:
        """Cycles in which ``test(value of port)`` holds."""
        times, vals = self._tv[port]
        out = []
        e, p = self.cycle0 + 3, self.period
        for i, v in enumerate(vals):
            if not test(v):
                continue
            a = times[i]
            b = times[i + 1] if i + 1 < len(times) else self.end_time + 1
            first = max(-(-(a - e) // p), self.first_cycle)
            last = min(-(-(b - e) // p) - 1, self.last_cycle)
            out.extend(range(first, last + 1))
        return out

    # ---- events --------------------------------------------------------------------------
    def accepts(self) -> list[tuple[int, dict]]:
        """``(cycle, request fields)`` of every ``req`` handshake."""
        return [(t, self.req.unpack(self.value("req__payload", t)))
                for t in self._cycles_where("req__valid", bool)
                if self.value("req__ready", t)]

    def responses(self) -> list[tuple[int, dict]]:
        """``(cycle, response fields)`` of every ``resp`` handshake."""
        return [(t, self.resp.unpack(self.value("resp__payload", t)))
                for t in self._cycles_where("resp__valid", bool)
                if self.value("resp__ready", t)]

    def commands(self) -> list[tuple[int, int, dict]]:
        """``(cycle, channel, command fields)`` of every valid ``cmd[c]`` (``c``: the global
        channel, ``stack * channels + channel``)."""
        vm = self.cmd.mask("valid")
        out = []
        for c in range(self.media_ports):
            name = f"cmd__{c}"
            out += [(t, c, self.cmd.unpack(self.value(name, t)))
                    for t in self._cycles_where(name, lambda v: v & vm)]
        return sorted(out, key=lambda x: (x[0], x[1]))

    def completions(self) -> list[tuple[int, int, dict]]:
        """``(cycle, channel, completion fields)`` of every valid ``cpl[c]``."""
        vm = self.cpl.mask("valid")
        out = []
        for c in range(self.media_ports):
            name = f"cpl__{c}"
            out += [(t, c, self.cpl.unpack(self.value(name, t)))
                    for t in self._cycles_where(name, lambda v: v & vm)]
        return sorted(out, key=lambda x: (x[0], x[1]))

    # ---- one request -----------------------------------------------------------------------
    def lifecycle(self, rid: int) -> dict:
        """Accept, MSHR hit or miss, media command and completion, response of request ``rid``.

        Raises
        ------
        ValueError
            ``rid`` is not in the scenario, or not accepted inside the recorded cycles.
        """
        from hbfsim.model.mapping import Mapper

        row = next((r for r in self.requests if r[0] == rid), None)
        if row is None:
            raise ValueError(f"--id {rid}: no such request in scenario "
                             f"{self.scenario.name!r}")
        _, op, addr, nbytes, source, arrival = row
        acc = next((t for t, f in self.accepts() if f["id"] == rid), None)
        if acc is None:
            raise ValueError(f"--id {rid}: request not accepted in cycles "
                             f"{self.first_cycle}..{self.last_cycle} of {self.path.name}")
        resp = next(((t, f) for t, f in self.responses() if f["id"] == rid), None)
        mapper = Mapper(self.cfg)
        page = (addr - self.cfg.base_address) // PAGE_BYTES
        stack, q = mapper.stack_of(page)
        ch, local, sub = mapper.channel_of(q, op == "W")
        ch += stack * self.cfg.channels          # the global channel of the media ports
        want = 0 if op == "R" else 1
        end = resp[0] if resp else self.last_cycle
        if getattr(self.cfg, "multiplane", "off") != "off":
            return self._request_multiplane(dict(
                id=rid, op=op, addr=addr, bytes=nbytes, source=source, arrival=arrival,
                channel=ch, subarray=sub, local_page=local, accept=acc,
                accept_ns=self.time_of(acc)), want, end, resp)
        cmds = [(t, c, f) for t, c, f in self.commands()
                if c == ch and f["page"] == local and f["op"] == want and t < end]
        out = {"id": rid, "op": op, "addr": addr, "bytes": nbytes, "source": source,
               "arrival": arrival, "channel": ch, "subarray": sub, "local_page": local,
               "accept": acc, "accept_ns": self.time_of(acc), "response": None,
               "command": None, "completion": None}
        if cmds:
            t, c, f = cmds[-1]
            tag = f["tag.index"] * 2 + f["tag.kind"]
            out["command"] = {"cycle": t, "ns": self.time_of(t), "op": "READ" if want == 0
                              else "PROGRAM", "tag": tag, "subarray": f["subarray"]}
            done = next(((tc, g) for tc, cc, g in self.completions()
                         if cc == ch and tc > t and g["tag.index"] * 2 + g["tag.kind"] == tag
                         and g["subarray"] == f["subarray"]), None)
            if done is not None:
                out["completion"] = {"cycle": done[0], "ns": self.time_of(done[0]),
                                     "buffer_hit": done[1]["buffer_hit"],
                                     "error": done[1]["error"]}
        if resp is not None:
            t, f = resp
            out["response"] = {"cycle": t, "ns": self.time_of(t),
                               **{k: f[k] for k in ("mshr_hit", "buffer_hit", "cache_hit",
                                                    "error")}}
        return out

    def _request_multiplane(self, out, want, end, resp):
        """:meth:`request` under multi-plane commands: the command is the one of the
        request's megaplane and row whose planes mask holds its plane (MP2); its completion
        the next of that megaplane naming the plane, the flags that plane's mask bits (MP7)."""
        M, S = self.cfg.megaplane_planes, self.cfg.subarrays_per_channel
        ch, sub = out["channel"], out["subarray"]
        g, plane, row = sub // M, sub % M, out["local_page"] // S
        out.update(response=None, command=None, completion=None)
        cmds = [(t, c, f) for t, c, f in self.commands()
                if c == ch and f["op"] == want and f["megaplane"] == g and f["row"] == row
                and f["planes"] >> plane & 1 and t < end]
        if cmds:
            t, c, f = cmds[-1]
            out["command"] = {"cycle": t, "ns": self.time_of(t), "op": "READ" if want == 0
                              else "PROGRAM", "subarray": sub, "megaplane": g,
                              "planes": f["planes"], "row": row}
            done = next(((tc, d) for tc, cc, d in self.completions()
                         if cc == ch and tc > t and d["megaplane"] == g
                         and d["planes"] >> plane & 1), None)
            if done is not None:
                out["completion"] = {"cycle": done[0], "ns": self.time_of(done[0]),
                                     "buffer_hit": done[1]["buffer_hit"] >> plane & 1,
                                     "error": done[1]["error"] >> plane & 1}
        if resp is not None:
            t, f = resp
            out["response"] = {"cycle": t, "ns": self.time_of(t),
                               **{k: f[k] for k in ("mshr_hit", "buffer_hit", "cache_hit",
                                                    "error")}}
        return out

    def check_trace(self, rows) -> tuple[int, str | None]:
        """Compare an hbf-trace-v1 trace with the VCD's accepts and responses.

        Returns ``(requests checked, first disagreement or None)``. Ingress rows must match
        the VCD's ``req`` handshakes (id and cycle), Completed rows its ``resp`` handshakes
        (id, cycle, ``mshr_hit``, ``cache_hit``, ``error``); every handshake in the VCD must
        have its row.
        """
        acc = {f["id"]: t for t, f in self.accepts()}
        res = {f["id"]: (t, f) for t, f in self.responses()}
        ingress = {r["request_id"]: r for r in rows if r["state"] == "Ingress"}
        completed = {r["request_id"]: r for r in rows if r["state"] == "Completed"}
        for rid, r in sorted(ingress.items()):
            if acc.get(rid) != r["sim_cycle"]:
                return len(ingress), (f"request {rid}: trace Ingress at cycle {r['sim_cycle']}, "
                                      f"VCD accept at {acc.get(rid, 'none')}")
        for rid, r in sorted(completed.items()):
            got = res.get(rid)
            if got is None or got[0] != r["sim_cycle"]:
                return len(ingress), (f"request {rid}: trace Completed at cycle "
                                      f"{r['sim_cycle']}, VCD response at "
                                      f"{got[0] if got else 'none'}")
            f = got[1]
            for key in ("mshr_hit", "cache_hit", "error"):
                if f[key] != r[key]:
                    return len(ingress), (f"request {rid}: trace {key}={r[key]}, VCD "
                                          f"{key}={f[key]} (cycle {got[0]})")
        extra = sorted(set(acc) - set(ingress)) or sorted(set(res) - set(completed))
        if extra:
            return len(ingress), f"request {extra[0]}: in the VCD but not in the trace"
        return len(ingress), None
