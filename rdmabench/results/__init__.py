"""Results in three rooms, each importing only the rooms before it: files (written, checked, read, folded into rows), verdicts (pass/fail and the diagnosis), reports (text, tables, HTML)."""
