# lmfuse CMake package: install rules, lmfuse-config.cmake and lmfuse_rewrite() (see cmake/LmfuseRewrite.cmake).
