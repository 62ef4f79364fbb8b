// Nothing to call: this module's constructor runs when the test process starts (SuiteStartup.c).
