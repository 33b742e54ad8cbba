// Part of upper.CPP (HEADER_FILE_ONLY): compiled only through its #include there.
int part() { return 2; }
