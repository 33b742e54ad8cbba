// A source whose folder is also one of the target's include folders.
int util() { return 1; }
