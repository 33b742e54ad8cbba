#ifndef APP_REGISTRY_H
#define APP_REGISTRY_H
// Each use of the macro adds one registration when the program starts (names made unique by __COUNTER__).
#define APP_CAT2(a, b) a##b
#define APP_CAT(a, b) APP_CAT2(a, b)
inline int &app_scale_registrations() {
  static int n = 0;
  return n;
}
#define APP_REGISTER_SCALE() static const int APP_CAT(app_registered_, __COUNTER__) = ++app_scale_registrations();
#endif
