"""scripts/plots: the results files turned into the notes' tables, inline figures and plots.

    load.py       the results files (results/<gpu>/<name>.json) and where their notes are
    text.py       number formatting and the generic tables every lesson shares
    freshness.py  whether a results file comes from the current code, and whether its GPU throttled
    expr.py       the inline markers' expressions: <!-- v:EXPR|FMT -->TEXT<!-- /v -->
    markers.py    rewriting README blocks and inline markers; check-notes
    views.py      which lesson is drawn by which view; the lesson blocks and the summary table
    day*.py       one view per lesson (tables, headline, plot)
    draw.py       the PNGs (matplotlib, imported only here and in the views' plot functions)

scripts/plot.py is the command line (make plots, make check-notes).
"""
