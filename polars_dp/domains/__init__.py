"""Public domain declarations: ordinal and nominal attributes, hierarchies, spatial boxes.

Declared by the user from public knowledge, never derived from the private data; they turn
rows into cell indices (Polars expressions) and validate values.
"""
