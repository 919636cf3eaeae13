"""Running a submission away from the grader: the worker, its limits and the result protocol.

Nothing in this package knows about checks or references. The grader sends probes (named input
triples) and receives observations (what happened on each) as plain data.
"""
