# Makes each line of a text file a line of a C string literal (the
# dashboard's stylesheet and script, embedded in the library by
# src/dashboard.c).
s/\\/\\\\/g
s/"/\\"/g
s/^/"/
s/$/\\n"/
