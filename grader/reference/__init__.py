"""Stored reference matrices; see refdata.py. Shipped as grader.reference."""
