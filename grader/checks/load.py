"""load: the file imports, the function exists and accepts three arrays."""

from __future__ import annotations

from grader.checks.base import CheckContext, CheckResult, no_result, result
from grader.suite import CheckSpec


class LoadCheck:
    kind = "load"

    def run(self, spec: CheckSpec, ctx: CheckContext) -> CheckResult:
        load = ctx.run.load
        function = ctx.suite.function
        if load is None:
            return result(spec, "failed", no_result(ctx).replace("no result", "the file did not finish loading"))
        if load.ok and not load.accepts_three:
            return result(spec, "failed", f"{function}{load.signature or '()'} cannot be called with (Q, K, V): {load.signature_error}")
        if load.ok:
            return result(spec, "passed", f"{function}{load.signature or '(...)'} loaded ({load.callable_type})")
        if load.reason == "function-missing":
            found = f"; callables found: {', '.join(load.available)}" if load.available else ""
            return result(spec, "failed", f"no callable named '{function}'{found}")
        assert load.error is not None
        where = f" at {load.error.where}" if load.error.line else ""
        return result(spec, "failed", f"importing the file raised {load.error.short}{where}")
