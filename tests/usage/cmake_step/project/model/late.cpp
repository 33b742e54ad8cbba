// Added to app after lmfuse_rewrite(): a unit under EDIT_ROOT the call never saw.
int late_unit() { return 1; }
