"""Reports: the result of grading one submission, and the reporters that render it."""
