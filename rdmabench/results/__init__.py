"""Results files, the live table, reports, comparisons and the HTML page."""
