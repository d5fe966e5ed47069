"""Judging a job or plan: the one judge, and the site's policy it applies."""
