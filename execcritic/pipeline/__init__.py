"""The evaluation pipeline (Appendix A.3): generate tests -> repair -> official score, with workers and resume."""
