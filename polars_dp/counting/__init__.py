"""The only code that reads private rows: frequency matrices, point coordinates, sequence contexts.

Each function reads its input once and returns an aggregate (or the validated columns) that a
mechanism adds noise to.
"""
