"""Developer harnesses, run from a checkout and never installed (pyproject packages only rdmabench*):

    python -m devtools.diagnose --generated    # does the attribution name the planted fault?
    python -m devtools.million                 # the results and report layers at cluster scale
    python -m devtools.sweep --np 8            # what a round of an all-pairs sweep costs
    python -m devtools.rounds --ring 2         # does a concurrent round cost a link anything?

netns: the namespace cluster diagnose --netns (its trials: netns_trials) and the tests run on; runs: one
`rdmabench run` as a subprocess."""
