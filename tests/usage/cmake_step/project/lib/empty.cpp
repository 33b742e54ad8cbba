// A program whose code is all in the objects it is given (link_forms: via_objects_*).
