"""The brains: what decides the next step (rules, a model), behind one protocol."""
