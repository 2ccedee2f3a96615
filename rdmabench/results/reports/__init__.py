"""The reports: a row as text (cells), the report formats (formats, html), the distribution per link class, and the live table of a run."""
