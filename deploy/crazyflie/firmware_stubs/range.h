/* robot_hrl test stub of the firmware's src/modules/interface/range.h: the ranges the decks' drivers set
 * (multiranger.c: front, back, left, right, up; zranger2.c / the Flow deck: down), in metres. Not the firmware's file. */
#ifndef ROBOT_HRL_STUB_RANGE_H
#define ROBOT_HRL_STUB_RANGE_H

typedef enum {
  rangeFront = 0,
  rangeBack,
  rangeLeft,
  rangeRight,
  rangeUp,
  rangeDown,
  RANGE_T_END,
} rangeDirection_t;

float rangeGet(rangeDirection_t direction);

#endif
