// Added to app after lmfuse_rewrite(), a .c source whose LANGUAGE is CXX.
int late_c_unit() { return 3; }
