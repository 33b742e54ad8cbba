#pragma once
#define TRAIN_CONFIG 1
