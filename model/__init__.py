"""The hbfsim golden model: plain Python + numpy, imports no simulator.

Components follow the hardware (the HBF-Sim paper §4): address mapping
(:mod:`.mapping`), NAND media timing, FTL and page buffers (:mod:`.media`), the stack
controller with MSHRs, write coverage buffer and channel scheduler (:mod:`.controller`),
the multi-stack system with fair return arbitration (:mod:`.system`), request sources
(:mod:`.requests`), hbf-trace-v1 (:mod:`.trace`), statistics (:mod:`.stats`), the GPU
request-injection model (:mod:`.gpu`; its shape and clocks :mod:`.gpu_config`, programs
:mod:`.gpu_program`, issue side :mod:`.gpu_issue`, stepped port :mod:`.gpu_port`) and the
named workloads (:mod:`.workloads`, the registry; families :mod:`.workloads_micro`,
:mod:`.workloads_llm`, :mod:`.workloads_layout`).
"""
