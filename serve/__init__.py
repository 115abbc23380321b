"""hbfsim.serve: step-level LLM serving on an HBM-HBF-host memory hierarchy.

The serving level of the serving paper ("Characterizing High Bandwidth Flash for LLM
Serving"; docs/sources.md). It shares the model shapes (``hbfsim.shapes``) and
the one ``HbfConfig`` with the device levels: the HBF tier's timing comes from the golden
model run on that configuration (``serve/characterize.py``), not from a constant, unless
the constant mode is asked for. See docs/serving.md.
"""
