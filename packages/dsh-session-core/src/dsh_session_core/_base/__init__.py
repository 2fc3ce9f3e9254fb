"""The base room: what every other room may use and which uses nothing of core: lossless
JSON values, the project's fixed names, closing, the store-name rule of errors.
"""
