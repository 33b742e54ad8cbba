// The one Catch2 main every test executable links (compiled once).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
