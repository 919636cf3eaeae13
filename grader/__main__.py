"""`python -m grader` is the same as the `grade` command."""

from grader.cli import main

if __name__ == "__main__":
    main()
