"""The hbfsim base-die controller as Amaranth HDL (docs/timing-contract.md, docs/rtl.md).

One block per module, each a :class:`amaranth.lib.wiring.Component` built from one
:class:`hbfsim.config.HbfConfig`:

* :mod:`.layouts` -- widths, enums and payload layouts shared by every block;
* :mod:`.mapper` -- stack-local page -> channel, channel-local page, subarray (contract §3);
* :mod:`.mshr` -- read MSHR table with per-request waiter lists (§4.2, §4.3);
* :mod:`.write_buffer` -- write coverage buffer (§4.2, §4.4, §5);
* :mod:`.channel_queue` and :mod:`.scheduler` -- channel queues and issue (§6, §7);
* :mod:`.admission` -- request slots (§4.1);
* :mod:`.response` -- the response stages R / K / E with link credits (§8);
* :mod:`.controller` -- the stack controller that composes them (§1);
* :mod:`.system` -- several stacks behind the host ports (§2);
* :mod:`.emit` -- Verilog output.
"""
