"""The simulated k3s node behind test/sim/k3s_sim.py (see that file)."""
