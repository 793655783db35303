"""notify/channels"""
