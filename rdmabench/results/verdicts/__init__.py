"""The verdicts: pass or fail against floors (verdict, outcome), the diagnosis (fleet, attribution) and what follows from it (hostlist, drain), and two runs compared (compare)."""
