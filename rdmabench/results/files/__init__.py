"""The results files: written (document, compact), checked (schema, the JSON Schemas in schemas/), read (loading, identity, dates), and folded into rows (rows, derived)."""
