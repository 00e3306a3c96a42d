"""Pure decisions: session policy, grants and approval modes, budgets."""
