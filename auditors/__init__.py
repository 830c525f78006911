"""Statistical auditing: certified empirical lower bounds on ε."""
