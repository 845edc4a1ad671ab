/* robot_hrl test stub of the firmware's app layer header (src/modules/interface/app.h): the app's entry point,
 * run in its own task when CONFIG_APP_ENABLE is set. Not the firmware's file. */
#ifndef ROBOT_HRL_STUB_APP_H
#define ROBOT_HRL_STUB_APP_H

void appMain(void);

#endif
