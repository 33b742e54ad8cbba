// Links the library without including its header: nothing of the model is compiled twice.
#include <iostream>

double libraryLoss();

int main() { std::cout << "library loss " << libraryLoss() << "\n"; }
